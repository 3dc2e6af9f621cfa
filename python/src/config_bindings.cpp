// flashjit.Config: the C++ Config, immutable from Python, with JSON/dict conversions, resolve()
// and check(); load_config_file and generate.
#include "bindings.hpp"

#include "cli/config_input.hpp"
#include "generator/config.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/compiler.hpp"

#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace flashjit::python {

namespace {

nb::object json_module() { return nb::module_::import_("json"); }

Config from_mapping(nb::handle data) {
  if (!PyDict_Check(data.ptr()))
    throw nb::type_error(("flashjit.Config: expected a dict (a JSON object), got " +
                          std::string(nb::type_name(data.type()).c_str()))
                             .c_str());
  const std::string text = nb::cast<std::string>(json_module().attr("dumps")(data));
  return parse_config_text(text, "config");
}

nb::object to_python(const nlohmann::json& j) { return json_module().attr("loads")(j.dump()); }

Config arch_applied(const Config& c, const std::optional<std::string>& arch) {
  return arch ? cli::with_arch(c, *arch) : cli::with_arch(c);
}

}  // namespace

void register_config(nb::module_& m) {
  nb::class_<Config>(m, "Config",
                     "An attention config (schema flashjit.attention.v1). Immutable; equal configs hash equally.")
      .def("__init__",
           [](Config* self, nb::handle data) { new (self) Config(data.is_none() ? Config{} : from_mapping(data)); },
           nb::arg("data") = nb::none(),
           "A config from a dict in the JSON form (docs/config.md); None gives the defaults. Fields "
           "are parsed and type-checked here; the rules are checked by resolve() and check().")
      .def_static("from_json", &parse_config_text, nb::arg("text"), nb::arg("origin") = "config",
                  "Parses JSON text; `origin` names the text in error messages.")
      .def_static("from_dict", &from_mapping, nb::arg("data"), "The config of a dict in the JSON form.")
      .def("to_json",
           [](const Config& c, std::optional<int> indent) {
             return indent ? to_json(c).dump(*indent) : canonical_json(c);
           },
           nb::arg("indent") = nb::none(),
           "JSON text; without indent the canonical form (sorted keys, no whitespace).")
      .def("to_dict", [](const Config& c) { return to_python(to_json(c)); }, "The JSON form as a dict.")
      .def("resolve", [](const Config& c, std::optional<std::string> arch) { return resolve(arch_applied(c, arch)); },
           nb::arg("arch") = nb::none(),
           "Every tuning field filled in for the target (`arch` replaces the config's; \"native\" is "
           "this machine's GPU). Raises ConfigError listing every broken rule.")
      .def("check", [](const Config& c, std::optional<std::string> arch) { return check_config(arch_applied(c, arch)); },
           nb::arg("arch") = nb::none(), "Every broken rule for the target, without raising (empty: valid).")
      .def("with_arch", [](const Config& c, const std::string& arch) { return cli::with_arch(c, arch); },
           nb::arg("arch"), "The same config for another target (\"native\": this machine's GPU).")
      .def_prop_ro("arch", [](const Config& c) { return c.arch; }, "The target, e.g. \"sm_90a\" or \"native\".")
      .def(nb::self == nb::self)
      .def(nb::self != nb::self)
      .def("__hash__", [](const Config& c) { return static_cast<Py_ssize_t>(ConfigHash()(c)); })
      .def("__repr__", [](const Config& c) { return "flashjit.Config(" + canonical_json(c) + ")"; })
      .def("__getstate__", [](const Config& c) { return canonical_json(c); })
      .def("__setstate__", [](Config& c, const std::string& text) { new (&c) Config(parse_config_text(text)); });

  m.def("load_config_file", &load_config_file, nb::arg("path"), "The config of a JSON file.");
  m.def("generate",
        [](const Config& c, bool flat, bool reference) {
          const Config target = cli::with_arch(c);  // "native": this machine's GPU
          const KernelSource src = reference ? generate_reference(target) : generate(target);
          return flat ? compilation_source(src) : src.unit;
        },
        nb::arg("config"), nb::arg("flat") = false, nb::arg("reference") = false,
        "The CUDA source of the config's kernel: the instantiation unit, or with flat=True the "
        "self-contained source NVRTC compiles and the cache key hashes.");
}

}  // namespace flashjit::python
