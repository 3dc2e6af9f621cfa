#include "bench/args.hpp"

#include <cctype>
#include <cstdlib>

namespace flashjit::bench {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

int parse_size(const std::string& text, const std::string& what) {
  std::string t = text;
  long mult = 1;
  if (!t.empty() && (t.back() == 'k' || t.back() == 'K')) {
    mult = 1024;
    t.pop_back();
  }
  if (t.empty() || t.size() > 9) throw UsageError(what + ": not a size: \"" + text + "\"");
  for (char c : t)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      throw UsageError(what + ": not a size: \"" + text + "\"");
  return static_cast<int>(std::atol(t.c_str()) * mult);
}

Args::Args(int argc, char** argv, const std::set<std::string>& value_flags,
           const std::set<std::string>& bool_flags) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    if (bool_flags.count(name)) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
      values_.insert_or_assign(name, std::string(1, '1'));
    } else if (value_flags.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
        value = argv[++i];
      }
      values_[name] = value;
    } else {
      throw UsageError("unknown flag --" + name + " (see --help)");
    }
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  auto v = get(name);
  return v ? *v : fallback;
}

int Args::get_int(const std::string& name, int fallback) const {
  auto v = get(name);
  return v ? parse_size(*v, "--" + name) : fallback;
}

double Args::get_double(const std::string& name, double fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end) throw UsageError("--" + name + ": not a number: \"" + *v + "\"");
  return d;
}

std::vector<std::string> Args::list(const std::string& name) const {
  auto v = get(name);
  return v ? split(*v, ',') : std::vector<std::string>{};
}

std::vector<int> Args::int_list(const std::string& name) const {
  std::vector<int> out;
  for (const auto& s : list(name)) out.push_back(parse_size(s, "--" + name));
  return out;
}

}  // namespace flashjit::bench
