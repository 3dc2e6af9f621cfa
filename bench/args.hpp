// A small command-line flag parser for the benchmark programs: "--name value", "--name=value"
// and boolean "--name". Unknown flags and missing values are errors that name the flag.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit::bench {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // value_flags take a value; bool_flags do not. Names are given without the leading "--".
  Args(int argc, char** argv, const std::set<std::string>& value_flags,
       const std::set<std::string>& bool_flags);

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  bool flag(const std::string& name) const { return has(name); }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  int get_int(const std::string& name, int fallback) const;
  double get_double(const std::string& name, double fallback) const;
  // Comma-separated list ("bf16,fp16"); empty when the flag is absent.
  std::vector<std::string> list(const std::string& name) const;
  // Comma-separated integers; "1k"/"16K" mean 1024/16384.
  std::vector<int> int_list(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// "512" -> 512, "2k" -> 2048; throws UsageError naming `what` on anything else.
int parse_size(const std::string& text, const std::string& what);
std::vector<std::string> split(const std::string& text, char sep);

}  // namespace flashjit::bench
