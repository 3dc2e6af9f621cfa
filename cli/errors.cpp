#include "cli/errors.hpp"

#include "cache/store.hpp"
#include "cli/npy.hpp"
#include "runtime/compiler.hpp"
#include "runtime/driver.hpp"
#include "runtime/flashjit.hpp"

namespace flashjit::cli {

UsageError::UsageError(std::vector<std::string> lines)
    : std::runtime_error(lines.empty() ? std::string("usage error") : lines.front()),
      lines_(std::move(lines)) {}

std::string issue_line(const ConfigIssue& issue) {
  if (issue.path.empty()) return (issue.value.empty() ? std::string("config") : issue.value) + ": " + issue.rule;
  return issue.message();
}

std::string one_line(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const ConfigError*>(&e)) {
    std::string s;
    for (const auto& i : ce->issues()) s += (s.empty() ? "" : "; ") + issue_line(i);
    return s;
  }
  std::string s = e.what();
  // A compile error's first line names the kernel and the dumped source; the log follows: keep
  // the first line and the log's first error.
  if (const auto* ce = dynamic_cast<const CompileError*>(&e)) {
    s = s.substr(0, s.find('\n'));
    const std::string& log = ce->log();
    for (size_t start = 0; start < log.size();) {
      const size_t nl = log.find('\n', start);
      const std::string line = log.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (line.find("error") != std::string::npos) {
        s += ": " + line.substr(line.find_first_not_of(" \t"));
        break;
      }
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  return s;
}

std::string one_line(std::exception_ptr ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    return one_line(e);
  } catch (...) {
    return "unknown failure";
  }
}

namespace {

void print_lines(Context& ctx, const std::string& prefix, const std::string& text) {
  // Continuation lines (compile logs, ...) are indented under the first.
  std::size_t start = 0;
  bool first = true;
  while (start <= text.size()) {
    std::size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (!(line.empty() && nl == std::string::npos && !first))
      ctx.err << (first ? "error: " + prefix : std::string("  ")) << line << "\n";
    first = false;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
}

}  // namespace

int report_exception(std::exception_ptr ep, Context& ctx, const std::string& origin) {
  const std::string prefix = origin.empty() ? "" : origin + ": ";
  try {
    std::rethrow_exception(ep);
  } catch (const ConfigError& e) {
    for (const auto& i : e.issues()) {
      if (i.path.empty() && !origin.empty() && i.value == origin) ctx.err << "error: " << prefix << i.rule << "\n";
      else ctx.err << "error: " << prefix << issue_line(i) << "\n";
    }
    if (e.issues().empty()) print_lines(ctx, prefix, e.what());
    return kUsage;
  } catch (const UsageError& e) {
    for (const auto& l : e.lines()) ctx.err << "error: " << prefix << l << "\n";
    return kUsage;
  } catch (const NpyError& e) {
    print_lines(ctx, prefix, e.what());
    return kUsage;
  } catch (const NoDeviceError& e) {
    const std::string what = e.what();
    print_lines(ctx, prefix, what.rfind("no GPU", 0) == 0 ? what : "no GPU: " + what);
    return kFailure;
  } catch (const ArgumentError& e) {
    print_lines(ctx, prefix, e.what());
    return kUsage;
  } catch (const CompileError& e) {
    print_lines(ctx, prefix, e.what());
    return kFailure;
  } catch (const cache::MissError& e) {
    print_lines(ctx, prefix, e.what());
    return kFailure;
  } catch (const cache::LockTimeout& e) {
    print_lines(ctx, prefix, e.what());
    return kFailure;
  } catch (const DriverError& e) {
    print_lines(ctx, prefix, e.what());
    return kFailure;
  } catch (const std::invalid_argument& e) {
    // Bad values of FLASHJIT_* variables and of numeric arguments.
    print_lines(ctx, prefix, e.what());
    return kUsage;
  } catch (const std::exception& e) {
    print_lines(ctx, prefix, e.what());
    return kFailure;
  } catch (...) {
    ctx.err << "error: " << prefix << "unknown failure\n";
    return kFailure;
  }
}

}  // namespace flashjit::cli
