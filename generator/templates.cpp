#include "generator/templates.hpp"

#include "generator/embedded_templates.hpp"

#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace flashjit {

namespace {

const std::map<std::string, const std::string*>& index() {
  static const std::map<std::string, const std::string*> idx = [] {
    std::map<std::string, const std::string*> m;
    for (const auto& t : detail::embedded_templates()) m[t.path] = &t.text;
    return m;
  }();
  return idx;
}

// The quoted include target of a line, if the line is an #include "..." directive.
bool include_target(const std::string& line, std::string& target) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line[i] != '#') return false;
  i = line.find_first_not_of(" \t", i + 1);
  if (i == std::string::npos || line.compare(i, 7, "include") != 0) return false;
  size_t a = line.find('"', i + 7);
  if (a == std::string::npos) return false;
  size_t b = line.find('"', a + 1);
  if (b == std::string::npos) return false;
  target = line.substr(a + 1, b - a - 1);
  return true;
}

bool is_pragma_once(const std::string& line) {
  std::istringstream ss(line);
  std::string hash, pragma, once;
  ss >> hash;
  if (hash == "#pragma") return (ss >> once) && once == "once";
  return hash == "#" && (ss >> pragma >> once) && pragma == "pragma" && once == "once";
}

void expand(const std::string& text, const std::string& from, std::set<std::string>& done,
            std::vector<std::string>& order, std::string* out) {
  std::istringstream in(text);
  std::string line, target;
  while (std::getline(in, line)) {
    if (include_target(line, target)) {
      auto it = index().find(target);
      if (it == index().end())
        throw std::runtime_error("template include \"" + target + "\" (from " + from +
                                 ") is not an embedded template");
      if (done.insert(target).second) {
        order.push_back(target);
        if (out) *out += "// ---- begin " + target + "\n";
        expand(*it->second, target, done, order, out);
        if (out) *out += "// ---- end " + target + "\n";
      }
      continue;
    }
    if (out && !is_pragma_once(line)) *out += line + "\n";
  }
}

}  // namespace

const std::string* find_template(const std::string& path) {
  auto it = index().find(path);
  return it == index().end() ? nullptr : it->second;
}

std::vector<std::string> template_paths() {
  std::vector<std::string> v;
  for (const auto& [k, _] : index()) v.push_back(k);
  return v;
}

std::string flatten(const std::string& unit) {
  std::set<std::string> done;
  std::vector<std::string> order;
  std::string out;
  expand(unit, "unit", done, order, &out);
  return out;
}

std::vector<std::string> included_templates(const std::string& unit) {
  std::set<std::string> done;
  std::vector<std::string> order;
  expand(unit, "unit", done, order, nullptr);
  return order;
}

}  // namespace flashjit
