// An ostream target that hands over each complete line: the CLI library's commands write their
// progress to a stream, and Python wants a call per line.
#pragma once

#include <functional>
#include <mutex>
#include <streambuf>
#include <string>

namespace flashjit::python {

class LineStreamBuf : public std::streambuf {
 public:
  explicit LineStreamBuf(std::function<void(const std::string&)> on_line) : on_line_(std::move(on_line)) {}
  ~LineStreamBuf() override;  // hands over a last line without a newline

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;

 private:
  void put_locked(char c);

  std::function<void(const std::string&)> on_line_;
  std::string line_;
  std::mutex mutex_;  // writers on several threads
};

}  // namespace flashjit::python
