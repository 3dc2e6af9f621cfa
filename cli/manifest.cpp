#include "cli/manifest.hpp"

#include "cli/config_input.hpp"
#include "cli/errors.hpp"
#include "generator/arch.hpp"
#include "generator/excerpt.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "generator/user_json.hpp"
#include "runtime/nvrtc_targets.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <unordered_set>

namespace flashjit::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// A vary value as it appears in an item's origin, and the most the whole label may take: every
// expanded item keeps its label.
constexpr size_t kLabelValueChars = 40;
constexpr size_t kMaxLabelChars = 240;
// Matrix sizes are counted up to here (far beyond any limit).
constexpr size_t kSaturated = size_t(1) << 40;
// A matrix can break one rule in each of its configs; the first lines say enough.
constexpr size_t kMaxIssueLines = 100;

std::string show(const ojson& v) { return json_excerpt(json::parse(v.dump())); }

json plain(const ojson& o) { return json::parse(o.dump()); }

// At most max_bytes + 1 bytes of the file (more is too large anyway); false when unreadable.
bool read_text(const fs::path& p, size_t max_bytes, std::string& out) {
  std::ifstream f(p, std::ios::binary);
  return f && read_at_most(f, max_bytes, out);
}

// A config file a manifest names: at most max_bytes + 1 bytes, and only a regular file (a FIFO
// planted there would block the build forever; it is opened without waiting for a writer).
// Returns "" or why it cannot be read.
std::string read_named_file(const fs::path& p, size_t max_bytes, std::string& out) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) why = std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) why = "not a regular file";
  out.clear();
  char buf[1 << 16];
  while (why.empty() && out.size() <= max_bytes) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, max_bytes + 1 - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) why = std::strerror(errno);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return why;
}

// "origin: path: rule" lines of a JsonInputError.
std::string json_problem(const std::string& where, const JsonInputError& e) {
  return where + ": " + (e.path().empty() ? "" : e.path() + ": ") + e.rule();
}

class ManifestParser {
 public:
  ManifestParser(fs::path base_dir, std::string origin) : base_(std::move(base_dir)), origin_(std::move(origin)) {}

  Manifest parse(const std::string& text) {
    ojson j;
    try {
      j = parse_user_json<ojson>(text, kMaxManifestBytes, "a manifest");
    } catch (const JsonInputError& e) {
      throw UsageError(json_problem(origin_, e));
    }
    if (!j.is_object()) throw UsageError(origin_ + ": a manifest must be a JSON object");

    Manifest m;
    std::set<std::string> known = {"schema", "archs", "reference", "configs", "matrix", "exclude", "description"};
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!known.count(it.key()))
        issue(excerpt(it.key()), "unknown key (known: schema, description, archs, reference, configs, matrix, exclude)");

    auto schema = j.find("schema");
    if (schema == j.end()) issue("schema", std::string("missing; must be \"") + kManifestSchema + "\"");
    else if (!schema->is_string() || schema->get<std::string>() != kManifestSchema)
      issue("schema", show(*schema) + ": must be \"" + kManifestSchema + "\"");

    if (auto d = j.find("description"); d != j.end() && !d->is_string()) issue("description", "must be a string");

    if (auto a = j.find("archs"); a != j.end()) {
      if (!a->is_array()) {
        issue("archs", "must be an array of targets such as \"sm_90a\"");
      } else {
        for (size_t i = 0; i < a->size(); ++i) {
          const ojson& v = (*a)[i];
          const std::string p = "archs[" + std::to_string(i) + "]";
          if (!v.is_string()) {
            issue(p, show(v) + ": must be a string");
            continue;
          }
          const std::string arch = v.get<std::string>();
          std::string why = arch == "native" ? "" : arch_problem(arch);
          for (const auto& i : nvrtc_target_issues(arch)) why = i.rule;
          if (!why.empty()) issue(p, show(v) + ": " + why);
          else m.archs.push_back(arch);
        }
      }
    }
    if (auto r = j.find("reference"); r != j.end()) {
      if (r->is_boolean()) m.reference = r->get<bool>();
      else issue("reference", show(*r) + ": must be true or false");
    }

    if (auto c = j.find("configs"); c != j.end()) {
      if (!c->is_array()) {
        issue("configs", "must be an array of config objects or file paths");
      } else {
        for (size_t i = 0; i < c->size(); ++i) {
          const std::string p = "configs[" + std::to_string(i) + "]";
          const ojson& v = (*c)[i];
          std::vector<ojson> entries = {v};
          if (v.is_string() && is_pattern(v.get<std::string>())) {
            entries.clear();
            for (const auto& f : glob(v.get<std::string>(), p)) entries.push_back(f);
          }
          for (const auto& e : entries) {
            std::string file;
            ojson cj;
            if (!make_room(1, p)) continue;
            if (!config_json(e, p, cj, file)) continue;
            add_config(m, plain(cj), file.empty() ? p : p + " (" + excerpt(file, 200) + ")");
          }
        }
      }
    }
    if (auto mx = j.find("matrix"); mx != j.end()) {
      if (!mx->is_array()) issue("matrix", "must be an array of {\"base\", \"vary\", \"exclude\"} objects");
      else
        for (size_t i = 0; i < mx->size(); ++i) expand(m, (*mx)[i], "matrix[" + std::to_string(i) + "]");
    }
    if (auto x = j.find("exclude"); x != j.end()) read_excludes(*x, "exclude", m.excludes);
    if (j.find("configs") == j.end() && j.find("matrix") == j.end())
      issue("", "lists no kernels: add \"configs\" and/or \"matrix\"");

    if (!first_over_.empty())
      issue("", "expands to " + std::to_string(configs_) + " configs; at most " + std::to_string(kMaxManifestItems) +
                    " in all (configs and every matrix together; " + first_over_ + " crosses the limit)");
    if (dropped_issues_)
      issues_.push_back(origin_ + ": " + std::to_string(dropped_issues_) + " more problems not shown");
    if (!issues_.empty()) throw UsageError(issues_);
    return m;
  }

 private:
  void issue(const std::string& path, const std::string& what) {
    if (issues_.size() >= kMaxIssueLines) {
      ++dropped_issues_;
      return;
    }
    issues_.push_back(origin_ + ": " + (path.empty() ? "" : path + ": ") + what);
  }

  static bool is_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

  // Files matching a pattern in its last path component, sorted; relative to the manifest.
  std::vector<std::string> glob(const std::string& pattern, const std::string& path) {
    const fs::path pat(pattern);
    const std::string dir_part = pat.parent_path().string();
    if (is_pattern(dir_part)) {
      issue(path, quoted_excerpt(pattern, 200) + ": wildcards are allowed in the file name only");
      return {};
    }
    const fs::path dir = pat.parent_path().is_absolute() ? pat.parent_path() : base_ / pat.parent_path();
    const std::string name = pat.filename().string();
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string f = it->path().filename().string();
      if (::fnmatch(name.c_str(), f.c_str(), FNM_PERIOD) == 0 && it->is_regular_file())
        out.push_back((pat.parent_path() / f).string());
    }
    std::sort(out.begin(), out.end());
    if (out.empty()) issue(path, quoted_excerpt(pattern, 200) + " matches no file in " + excerpt(dir.string(), 200));
    return out;
  }

  // A config given inline or as a path relative to the manifest.
  bool config_json(const ojson& v, const std::string& path, ojson& out, std::string& file) {
    if (v.is_object()) {
      out = v;
      return true;
    }
    if (!v.is_string()) {
      issue(path, show(v) + ": must be a config object or the path of a config file");
      return false;
    }
    file = v.get<std::string>();
    fs::path p = fs::path(file).is_absolute() ? fs::path(file) : base_ / file;
    std::string text;
    if (const std::string why = read_named_file(p, kMaxConfigBytes, text); !why.empty()) {
      issue(path, "cannot read config file " + excerpt(p.string(), 200) + ": " + why);
      return false;
    }
    try {
      out = parse_user_json<ojson>(text, kMaxConfigBytes, "a config");
    } catch (const JsonInputError& e) {
      issue(path, json_problem(excerpt(p.string(), 200), e));
      return false;
    }
    return true;
  }

  // Counts `n` more configs against the manifest's total; false past the limit, after which
  // the rest is only counted (parse() reports the total).
  bool make_room(size_t n, const std::string& path) {
    configs_ += n;
    if (configs_ > kMaxManifestItems && first_over_.empty()) first_over_ = path;
    return first_over_.empty();
  }

  bool add_config(Manifest& m, const json& j, const std::string& origin) {
    try {
      m.configs.push_back({parse_config(j), origin, nullptr});
      return true;
    } catch (const ConfigError& e) {
      for (const auto& i : e.issues()) issue(origin, issue_line(i));
      return false;
    }
  }

  void expand(Manifest& m, const ojson& entry, const std::string& path) {
    if (!entry.is_object()) {
      issue(path, "must be an object with \"base\" and \"vary\"");
      return;
    }
    for (auto it = entry.begin(); it != entry.end(); ++it)
      if (it.key() != "base" && it.key() != "vary" && it.key() != "exclude")
        issue(path + "." + excerpt(it.key()), "unknown key (known: base, vary, exclude)");

    ojson base = ojson::object();
    std::string base_file;
    if (auto b = entry.find("base"); b != entry.end()) {
      if (!config_json(*b, path + ".base", base, base_file)) return;
    }
    std::vector<std::pair<std::string, std::vector<ojson>>> axes;
    size_t total = 1;
    if (auto v = entry.find("vary"); v != entry.end()) {
      if (!v->is_object()) {
        issue(path + ".vary", "must be an object mapping dotted field paths to arrays of values");
        return;
      }
      for (auto it = v->begin(); it != v->end(); ++it) {
        if (!it.value().is_array() || it.value().empty()) {
          issue(path + ".vary." + excerpt(it.key()), "must be a non-empty array of values");
          return;
        }
        axes.emplace_back(it.key(), std::vector<ojson>(it.value().begin(), it.value().end()));
        total = std::min(total * it.value().size(), kSaturated);  // sizes are below 2^24: no overflow
      }
    }
    if (!make_room(total, path)) return;
    // Shared by every config of the matrix: one copy, however many configs it expands to.
    auto excludes = std::make_shared<std::vector<Exclusion>>();
    if (auto x = entry.find("exclude"); x != entry.end())
      if (!read_excludes(*x, path + ".exclude", *excludes)) return;

    // Odometer over the axes; the last axis varies fastest.
    std::vector<size_t> pos(axes.size(), 0);
    for (size_t n = 0; n < total; ++n) {
      json j = plain(base);
      std::string label;
      bool ok = true;
      for (size_t a = 0; a < axes.size(); ++a) {
        const json value = plain(axes[a].second[pos[a]]);
        const std::string err = set_dotted(j, axes[a].first, value);
        if (!err.empty()) {
          issue(path + ".vary." + excerpt(axes[a].first), err);
          ok = false;
        }
        if (label.size() <= kMaxLabelChars)
          label += (label.empty() ? "" : ", ") + excerpt(axes[a].first, kLabelValueChars) + "=" +
                   json_excerpt(value, kLabelValueChars);
      }
      for (size_t a = axes.size(); a-- > 0;) {
        if (++pos[a] < axes[a].second.size()) break;
        pos[a] = 0;
      }
      if (!ok) return;  // the same path fails for every combination
      std::string origin = path + (base_file.empty() ? "" : " (" + excerpt(base_file, 200) + ")");
      if (!label.empty()) origin += " {" + excerpt(label, kMaxLabelChars) + "}";
      Config c;
      try {
        c = parse_config(j);
      } catch (const ConfigError& e) {
        for (const auto& i : e.issues()) issue(origin, issue_line(i));
        continue;
      }
      m.configs.push_back({c, origin, excludes});
    }
  }

  bool read_excludes(const ojson& x, const std::string& path, std::vector<Exclusion>& out) {
    if (!x.is_array()) {
      issue(path, "must be an array of {\"dotted.path\": value} objects");
      return false;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (!x[i].is_object() || x[i].empty()) {
        issue(path + "[" + std::to_string(i) + "]", "must be a non-empty object of dotted paths and values");
        return false;
      }
      out.push_back(plain(x[i]));
    }
    return true;
  }

  fs::path base_;
  std::string origin_;
  std::vector<std::string> issues_;
  size_t dropped_issues_ = 0;
  size_t configs_ = 0;       // configs listed so far, against kMaxManifestItems
  std::string first_over_;   // where the count crossed it
};

}  // namespace

bool excluded(const json& config, const std::vector<Exclusion>& excludes) {
  for (const auto& x : excludes) {
    bool all = true;
    for (auto it = x.begin(); it != x.end() && all; ++it) {
      const json* have = get_dotted(config, it.key());
      if (!have) {
        all = false;
      } else if (it.value().is_array()) {
        bool any = false;
        for (const auto& v : it.value()) any = any || *have == v;
        all = any;
      } else {
        all = *have == it.value();
      }
    }
    if (all) return true;
  }
  return false;
}

std::string set_dotted(json& j, const std::string& path, const json& value) {
  if (path.empty()) return "empty field path";
  if (std::count(path.begin(), path.end(), '.') >= kMaxJsonDepth)
    return "field path " + quoted_excerpt(path) + " has more than " + std::to_string(kMaxJsonDepth) + " parts";
  json* cur = &j;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) return "malformed field path " + quoted_excerpt(path);
    if (!cur->is_object()) return quoted_excerpt(path.substr(0, start ? start - 1 : 0)) + " is not an object";
    if (dot == std::string::npos) {
      json& target = (*cur)[part];
      if (value.is_object() && target.is_object()) target.merge_patch(value);
      else target = value;
      return "";
    }
    json& next = (*cur)[part];
    if (next.is_null()) next = json::object();
    cur = &next;
    start = dot + 1;
  }
}

const json* get_dotted(const json& j, const std::string& path) {
  const json* cur = &j;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(part);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Manifest parse_manifest(const std::string& text, const fs::path& base_dir, const std::string& origin) {
  return ManifestParser(base_dir, origin).parse(text);
}

Manifest load_manifest(const std::string& path) {
  std::string text;
  if (!read_text(path, kMaxManifestBytes, text)) throw UsageError(path + ": cannot read the manifest");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return parse_manifest(text, dir, path);
}

Plan make_plan(const Manifest& m, const std::vector<std::string>& archs_override) {
  const std::vector<std::string>& archs = archs_override.empty() ? m.archs : archs_override;
  const size_t targets = std::max<size_t>(1, archs.size()), kinds = m.reference ? 2 : 1;
  // Each factor is at most kMaxManifestItems (configs) or a command line's worth: no overflow.
  const size_t total = m.configs.size() * targets * kinds;
  if (total > kMaxManifestItems)
    throw UsageError("the manifest expands to " + std::to_string(total) + " kernels (" +
                     std::to_string(m.configs.size()) + " configs x " + std::to_string(targets) +
                     (targets == 1 ? " target" : " targets") + (kinds == 2 ? " x 2 with the references" : "") +
                     "); at most " + std::to_string(kMaxManifestItems) + " in all");
  Plan plan;
  std::unordered_set<std::string> seen;
  auto add = [&](PlanItem item, const std::string& identity) {
    ++plan.expanded;
    if (!seen.insert(identity).second) {
      ++plan.duplicates;
      return;
    }
    plan.items.push_back(std::move(item));
  };
  for (const auto& mc : m.configs) {
    std::vector<std::string> targets = archs;
    if (targets.empty()) targets.push_back(mc.config.arch);
    for (const auto& arch : targets) {
      Config c = mc.config;
      c.arch = arch;
      const json as_written = to_json(c);
      if ((mc.excludes && excluded(as_written, *mc.excludes)) || excluded(as_written, m.excludes)) {
        ++plan.excluded;
        continue;
      }
      for (bool reference : {false, true}) {
        if (reference && !m.reference) continue;
        PlanItem item;
        item.arch = arch;
        item.reference = reference;
        item.origin = mc.origin;
        // Resolved here, generated when compiled: a planned item holds its config, not its source.
        try {
          c = with_arch(c);
          item.arch = c.arch;
          item.config = reference ? reference_problem(c) : resolve(c);
          item.name = reference ? reference_name(item.config) : readable_name(item.config);
          const std::string identity = std::string(reference ? "ref|" : "fwd|") + canonical_json(item.config);
          add(std::move(item), identity);
        } catch (const std::exception& e) {
          item.error = one_line(e);
          item.config = c;
          item.name = (reference ? "ref" : "fwd") + readable_name(c).substr(3);
          add(std::move(item), std::string(reference ? "ref-err|" : "err|") + canonical_json(c));
        }
      }
    }
  }
  return plan;
}

Shard parse_shard(const std::string& s) {
  const size_t slash = s.find('/');
  auto bad = [&] { return UsageError("--shard " + s + ": must be I/N with 0 <= I < N (e.g. 0/4)"); };
  if (slash == std::string::npos) throw bad();
  Shard sh;
  try {
    size_t used = 0;
    sh.index = std::stoi(s.substr(0, slash), &used);
    if (used != slash) throw bad();
    const std::string n = s.substr(slash + 1);
    sh.count = std::stoi(n, &used);
    if (used != n.size()) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  if (sh.count < 1 || sh.index < 0 || sh.index >= sh.count) throw bad();
  return sh;
}

std::vector<PlanItem> take_shard(const std::vector<PlanItem>& items, const Shard& shard) {
  std::vector<PlanItem> out;
  for (size_t i = 0; i < items.size(); ++i)
    if (static_cast<int>(i % static_cast<size_t>(shard.count)) == shard.index) out.push_back(items[i]);
  return out;
}

}  // namespace flashjit::cli
