// flashjit's C++ errors as Python exceptions. Each keeps the C++ message as its text and exposes
// the structured parts as attributes (ConfigError.issues with their JSON paths, CompileError.log,
// DriverError.code, UsageError.lines). Every type derives from flashjit.Error and from the
// builtin a Python caller would expect (ValueError for bad input, RuntimeError for failures).
#include "bindings.hpp"

#include "cache/store.hpp"
#include "cli/errors.hpp"
#include "generator/config.hpp"
#include "runtime/compiler.hpp"
#include "runtime/driver.hpp"
#include "runtime/flashjit.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <initializer_list>
#include <utility>

namespace flashjit::python {

namespace {

struct Types {
  PyObject* error = nullptr;
  PyObject* config = nullptr;
  PyObject* argument = nullptr;
  PyObject* usage = nullptr;
  PyObject* compile = nullptr;
  PyObject* driver = nullptr;
  PyObject* no_device = nullptr;
  PyObject* cache_miss = nullptr;
  PyObject* lock_timeout = nullptr;
};
Types types;  // created once at import; module attributes keep them alive

PyObject* new_type(nb::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  nb::list b;
  for (PyObject* base : bases) b.append(nb::borrow(base));
  const std::string qualified = std::string("flashjit.") + name;
  PyObject* t = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, nb::tuple(b).ptr(), nullptr);
  if (!t) throw nb::python_error();
  m.attr(name) = nb::handle(t);
  return t;
}

// Raises `type(what)` with the given attributes set on the instance.
void raise(PyObject* type, const char* what, std::initializer_list<std::pair<const char*, nb::object>> attrs) {
  PyObject* exc = PyObject_CallFunction(type, "s", what);
  if (!exc) return;  // the constructor's own error stays set
  for (const auto& [name, value] : attrs) PyObject_SetAttrString(exc, name, value.ptr());
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const ConfigError& e) {
    raise(types.config, e.what(), {{"issues", nb::cast(e.issues())}});
  } catch (const ArgumentError& e) {
    raise(types.argument, e.what(), {});
  } catch (const cli::UsageError& e) {
    std::string text;  // what() is the first line only
    for (const auto& line : e.lines()) text += (text.empty() ? "" : "\n") + line;
    raise(types.usage, text.c_str(), {{"lines", nb::cast(e.lines())}});
  } catch (const CompileError& e) {
    raise(types.compile, e.what(), {{"log", nb::cast(e.log())}, {"source_path", nb::cast(e.source_path())}});
  } catch (const DriverError& e) {
    raise(types.driver, e.what(), {{"code", nb::cast(static_cast<int>(e.code()))}});
  } catch (const NoDeviceError& e) {
    raise(types.no_device, e.what(), {});
  } catch (const cache::MissError& e) {
    raise(types.cache_miss, e.what(), {});
  } catch (const cache::LockTimeout& e) {
    raise(types.lock_timeout, e.what(), {});
  }
}

}  // namespace

void register_errors(nb::module_& m) {
  nb::class_<ConfigIssue>(m, "ConfigIssue", "One broken rule of a config: where, what was found, which rule")
      .def_ro("path", &ConfigIssue::path, "Dotted JSON path of the field (empty for a file-level problem)")
      .def_ro("value", &ConfigIssue::value, "The value found, as JSON text")
      .def_ro("rule", &ConfigIssue::rule, "The rule it breaks")
      .def_prop_ro("message", &ConfigIssue::message, "\"path = value: rule\"")
      .def("__repr__", [](const ConfigIssue& i) { return "ConfigIssue(" + i.message() + ")"; });

  types.error = new_type(m, "Error", {PyExc_Exception}, "Base class of every flashjit error.");
  types.config = new_type(m, "ConfigError", {types.error, PyExc_ValueError},
                          "A config breaks rules; .issues lists each (path, value, rule).");
  types.argument = new_type(m, "ArgumentError", {types.error, PyExc_ValueError},
                            "A launch argument (tensor, size, stride, pointer) breaks a rule; the text names it.");
  types.usage = new_type(m, "UsageError", {types.error, PyExc_ValueError},
                         "A bad manifest, shard or other input; .lines has one line per problem.");
  types.compile = new_type(m, "CompileError", {types.error, PyExc_RuntimeError},
                           "NVRTC failed; .log is its log, .source_path the dumped source.");
  types.driver = new_type(m, "DriverError", {types.error, PyExc_RuntimeError},
                          "A CUDA driver call failed; .code is its CUresult.");
  types.no_device = new_type(m, "NoDeviceError", {types.error, PyExc_RuntimeError},
                             "No CUDA driver or no GPU; the text says which.");
  types.cache_miss = new_type(m, "CacheMissError", {types.error, PyExc_RuntimeError},
                              "Offline mode (FLASHJIT_OFFLINE=1) and the kernel is in no cache layer.");
  types.lock_timeout = new_type(m, "LockTimeout", {types.error, PyExc_TimeoutError},
                                "A cache entry's lock was not had in time; the text names the lock file.");
  nb::register_exception_translator(translate);
}

}  // namespace flashjit::python
