#include "generator/user_json.hpp"

#include "generator/excerpt.hpp"

#include <set>
#include <vector>

namespace flashjit {

JsonInputError::JsonInputError(std::string path, std::string rule)
    : std::runtime_error(path.empty() ? rule : path + ": " + rule), path_(std::move(path)), rule_(std::move(rule)) {}

std::string byte_limit_text(std::size_t bytes) {
  std::string s = bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                  : bytes % 1024 == 0     ? std::to_string(bytes >> 10) + " KiB"
                                          : std::to_string(bytes) + " bytes";
  return s + " (" + std::to_string(bytes) + " bytes)";
}

namespace {

constexpr std::size_t kMaxPathChars = 160;

// Walks the parser's events with a stack of open objects and arrays: the depth, the keys seen
// in each object and the path of the current value. Stops at the first problem.
class Checker final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    f.key = k;
    if (!f.keys.insert(k).second) return fail(path(), "duplicate key: each key may appear only once in an object");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // nlohmann's message quotes the last token read, which may be the whole input.
    std::string what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos)
      what = what.substr(what.find("] ") + 2);
    return fail("", "not valid JSON: " + excerpt(what, 200));
  }

  const std::string& problem_path() const { return problem_path_; }
  const std::string& problem() const { return problem_; }

 private:
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
    std::string key;
    std::size_t index = 0;
  };

  bool scalar() {
    advance();
    return true;
  }
  bool open(bool object) {
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth)
      return fail(path(), "nested deeper than " + std::to_string(kMaxJsonDepth) +
                              " levels of objects and arrays, the most flashjit reads");
    stack_.push_back(Frame{object, {}, {}, 0});
    return true;
  }
  bool close() {
    stack_.pop_back();
    advance();
    return true;
  }
  // A value inside an array is done: the next one has the next index.
  void advance() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
  }
  bool fail(std::string path, std::string rule) {
    problem_path_ = std::move(path);
    problem_ = std::move(rule);
    return false;
  }
  std::string path() const {
    std::string p;
    for (const Frame& f : stack_) {
      if (p.size() > kMaxPathChars) return p + "...";
      if (f.object) p += (p.empty() ? "" : ".") + excerpt(f.key, 32);
      else p += "[" + std::to_string(f.index) + "]";
    }
    return p;
  }

  std::vector<Frame> stack_;
  std::string problem_path_;
  std::string problem_;
};

}  // namespace

void check_user_json(const std::string& text, std::size_t max_bytes, const char* what) {
  if (text.size() > max_bytes)
    throw JsonInputError("", "larger than " + byte_limit_text(max_bytes) + ", the most " + what + " may hold");
  Checker checker;
  if (!nlohmann::json::sax_parse(text, &checker)) throw JsonInputError(checker.problem_path(), checker.problem());
}

bool read_at_most(std::istream& in, std::size_t max_bytes, std::string& out) {
  out.clear();
  char buf[1 << 16];
  while (out.size() <= max_bytes) {
    in.read(buf, static_cast<std::streamsize>(std::min<std::size_t>(sizeof buf, max_bytes + 1 - out.size())));
    out.append(buf, static_cast<std::size_t>(in.gcount()));
    if (!in) break;
  }
  return !in.bad();
}

}  // namespace flashjit
