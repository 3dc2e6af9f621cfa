#include "generator/generate.hpp"

#include "generator/emit.hpp"
#include "generator/family.hpp"
#include "generator/resolve.hpp"

namespace flashjit {

KernelSource generate(const Config& c) {
  Config r = resolve(c);
  ArchInfo arch = config_arch(r);
  return family(*r.tuning.family).emit(r, arch);
}

Config reference_problem(const Config& c) {
  // The reference depends on the problem only: family limits and tuning do not bind it.
  Config p = c;
  p.tuning = Tuning{};
  auto issues = check_problem(p);
  if (!issues.empty()) throw ConfigError(issues);
  return p;
}

std::string reference_name(const Config& problem) { return "ref" + readable_name(problem).substr(3); }

KernelSource generate_reference(const Config& c) {
  const Config p = reference_problem(c);
  ArchInfo arch = config_arch(p);
  KernelSource s;
  s.name = reference_name(p);
  s.arch = arch.name;
  s.config = to_json(p);
  s.launch.family = "reference";
  s.launch.entry = emit::entry_symbol(s.name, canonical_json(p));
  s.launch.threads = 128;
  s.launch.block_m = 1;
  s.launch.block_n = 128;
  // A shared K/V (latent) cache's V is K's columns, so it takes K's scales.
  s.unit = emit::unit_header(s.name, p) +
           emit::traits_struct(p, {{"kSharedKv", p.kv_layout.shared_kv ? "true" : "false"}}) +
           "#include \"common/reference.cuh\"\n\n" +
           emit::entry_function(s.launch.entry, 128, 1, "flashjit::reference::attention");
  return s;
}

}  // namespace flashjit
