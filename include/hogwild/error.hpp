// Errors in two tiers. Recoverable failures (I/O, bad data, bad options, a dead
// worker, exhausted resources) throw a type derived from hogwild::Error; broken
// invariants go through HOGWILD_ENFORCE, which names the condition and both values.
// Library code never calls exit(): main() catches and prints one line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hogwild {

// Process exit statuses used by the CLIs; documented in docs/ERRORS.md.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // internal error or an unexpected exception
  kExitBadInput = 2,      // malformed data file or invalid option
  kExitWorkerFailed = 3,  // a worker process died or failed
  kExitResource = 4,      // not enough shared memory, memory or disk
  kExitInterrupted = 130, // SIGINT
  kExitTerminated = 143,  // SIGTERM
  kExitPipe = 141,        // standard output closed under the run (SIGPIPE's 128 + 13)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitFailure)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

// A data file is malformed. The message starts with "file:line: ".
class DataError : public Error {
 public:
  DataError(const std::string& file, std::size_t line, const std::string& what)
      : Error(located(file, line, what), kExitBadInput),
        file_(file), line_(line) {}
  const std::string& file() const noexcept { return file_; }
  std::size_t line() const noexcept { return line_; }
  // "file:line: what" ("file: what" when line is 0, for binary files).
  static std::string located(const std::string& file, std::size_t line, const std::string& what);

 private:
  std::string file_;
  std::size_t line_;
};

// An option or a combination of options is invalid.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& what) : Error(what, kExitBadInput) {}
};

// A file could not be opened, read or written.
class IoError : public Error {
 public:
  explicit IoError(const std::string& what) : Error(what, kExitBadInput) {}

 protected:
  IoError(const std::string& what, int code) : Error(what, code) {}
};

// A write to a pipe whose reader is gone (EPIPE: standard output into `| head`), with
// SIGPIPE ignored: exit 141, as the signal would have given.
class PipeError : public IoError {
 public:
  explicit PipeError(const std::string& what) : IoError(what, kExitPipe) {}
};

// Shared memory, memory or disk is too small for what was asked.
class ResourceError : public Error {
 public:
  explicit ResourceError(const std::string& what) : Error(what, kExitResource) {}
};

// A worker process exited with a non-zero status or was killed.
class WorkerError : public Error {
 public:
  explicit WorkerError(const std::string& what) : Error(what, kExitWorkerFailed) {}
};

// Training was stopped by SIGINT or SIGTERM; exit_code() is 130 or 143.
class Interrupted : public Error {
 public:
  explicit Interrupted(int signal)
      : Error(signal == 2 ? "interrupted (SIGINT)" : "terminated (SIGTERM)",
              signal == 2 ? kExitInterrupted : kExitTerminated),
        signal_(signal) {}
  int signal() const noexcept { return signal_; }

 private:
  int signal_;
};

// ENOSPC, EFBIG or EDQUOT: the disk (or the file-size limit) is full, which an
// output's writer reports as a ResourceError (exit 4).
bool is_out_of_space(int err) noexcept;

namespace detail {
[[noreturn]] void enforce_fail(const char* cond, const char* file, int line, const std::string& detail);

template <class A, class B>
std::string both_values(const A& a, const B& b) {
  std::ostringstream os;
  os << a << " vs " << b;
  return os.str();
}
}  // namespace detail

}  // namespace hogwild

// Invariant checks: throw hogwild::Error naming the condition, the place and the values.
#define HOGWILD_ENFORCE(cond, msg)                                                   \
  do {                                                                               \
    if (!(cond)) ::hogwild::detail::enforce_fail(#cond, __FILE__, __LINE__, (msg));  \
  } while (0)

#define HOGWILD_ENFORCE_OP(a, op, b)                                                         \
  do {                                                                                       \
    const auto& hogwild_a_ = (a);                                                            \
    const auto& hogwild_b_ = (b);                                                            \
    if (!(hogwild_a_ op hogwild_b_))                                                         \
      ::hogwild::detail::enforce_fail(#a " " #op " " #b, __FILE__, __LINE__,                 \
                                      ::hogwild::detail::both_values(hogwild_a_, hogwild_b_)); \
  } while (0)

#define HOGWILD_ENFORCE_EQ(a, b) HOGWILD_ENFORCE_OP(a, ==, b)
#define HOGWILD_ENFORCE_LE(a, b) HOGWILD_ENFORCE_OP(a, <=, b)
#define HOGWILD_ENFORCE_LT(a, b) HOGWILD_ENFORCE_OP(a, <, b)
