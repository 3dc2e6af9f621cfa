# `cmake --install` and the exported package: find_package(flashjit) -> flashjit::flashjit.
include(CMakePackageConfigHelpers)

set(FLASHJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashjit)
install(TARGETS flashjit flashjit_runtime flashjit_cache flashjit_generator
        EXPORT flashjitTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET flashjit_cli)
  install(TARGETS flashjit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# Headers keep their stage folders; the device ABI header travels with them.
foreach(stage generator cache runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${stage}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/flashjit/${stage}
          FILES_MATCHING PATTERN "*.hpp")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/templates/common/params.cuh
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/flashjit/common)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/flashjit.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/flashjit)

install(EXPORT flashjitTargets NAMESPACE flashjit:: DESTINATION ${FLASHJIT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flashjitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/flashjitConfig.cmake INSTALL_DESTINATION ${FLASHJIT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/flashjitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/flashjitConfig.cmake ${PROJECT_BINARY_DIR}/flashjitConfigVersion.cmake
        DESTINATION ${FLASHJIT_CMAKE_DIR})
