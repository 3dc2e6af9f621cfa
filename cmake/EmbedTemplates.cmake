# flashjit_embed_templates(OUTPUT file ROOT dir FILES f...)
# Writes a C++ file defining flashjit::detail::embedded_templates(): every template's path relative
# to ROOT and its text. The text is stored as a raw string split into chunks (compilers cap the
# length of one literal).
set(_FLASHJIT_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_templates_script.cmake)

function(flashjit_embed_templates)
  cmake_parse_arguments(ARG "" "OUTPUT;ROOT" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DROOT=${ARG_ROOT}
            "-DFILES=${ARG_FILES}" -P ${_FLASHJIT_EMBED_SCRIPT}
    DEPENDS ${ARG_FILES} ${_FLASHJIT_EMBED_SCRIPT}
    COMMENT "Embedding device templates"
    VERBATIM)
endfunction()
