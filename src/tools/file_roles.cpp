#include "file_roles.hpp"

#include <fmt/core.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>

#include "data/file_io.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/metrics.hpp"

namespace hogwild::tools {

std::vector<FileRole> labels_beside(std::string_view option, const std::string& images,
                                    const std::string& given) {
  if (!given.empty() || images.empty() || images == "-") return {};
  const std::string guess = idx_labels_path_for(images);
  if (guess.empty()) return {};
  const std::string other = guess.ends_with(".gz") ? guess.substr(0, guess.size() - 3) : guess + ".gz";
  return {{option, guess}, {option, other}};
}

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  if (a.empty() || b.empty() || a == "-" || b == "-") return false;
  std::error_code ea, eb;
  const auto sa = fs::status(a, ea), sb = fs::status(b, eb);
  if (fs::exists(sa) || fs::exists(sb)) {
    if (!fs::is_regular_file(sa) || !fs::is_regular_file(sb)) return false;
    std::error_code e;
    return fs::equivalent(a, b, e) && !e;
  }
  std::error_code ca, cb;
  const auto pa = fs::weakly_canonical(fs::absolute(a), ca);
  const auto pb = fs::weakly_canonical(fs::absolute(b), cb);
  return !ca && !cb && pa == pb;
}

namespace {
bool g_stdout_closed = false;  // reopen_closed_standard_streams found it closed
}  // namespace

void reopen_closed_standard_streams() noexcept {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int null = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);  // (the lowest: fd)
    if (null >= 0 && null != fd) {
      ::dup2(null, fd);
      ::close(null);
    }
    if (fd == 1) g_stdout_closed = true;
  }
}

namespace {
extern "C" void remove_temporary_and_stop(int sig) {
  detail::remove_pending_temporary();
  ::raise(sig);  // SA_RESETHAND: the default action now
}
}  // namespace

void remove_temporaries_on_stop() noexcept {
  struct sigaction sa {};
  sa.sa_handler = remove_temporary_and_stop;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sig, &sa, nullptr);
  }
}

void check_outputs(const std::vector<FileRole>& inputs, const std::vector<FileRole>& outputs,
                   std::chrono::milliseconds wait, std::vector<int>* taken) {
  // Standard output redirected onto an input (`>> model.st`, `> train.svm`): what
  // the tool prints, and an output given as `-`, would land in it.
  for (const FileRole& in : inputs)
    if (!in.path.empty() && same_file("/proc/self/fd/1", in.path))
      throw ConfigError(fmt::format("standard output is the {} file {}: what is written there "
                                    "would land in that input; redirect it elsewhere",
                                    in.option, in.path));
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const FileRole& out = outputs[i];
    if (out.path.empty()) continue;
    if (g_stdout_closed && detail::is_stdout(out.path))
      throw ConfigError(fmt::format("{} {}: standard output is closed (>&-), so it would go nowhere; "
                                    "give a file", out.option, out.path));
    for (const FileRole& in : inputs)
      if (in.option != out.may_replace && same_file(out.path, in.path))
        throw ConfigError(fmt::format(
            "{} {} is the {} file: writing it would overwrite that input; give {} another path",
            out.option, out.path, in.option, out.option));
    for (std::size_t j = 0; j < i; ++j)
      if (same_file(out.path, outputs[j].path))
        throw ConfigError(fmt::format("{} {} is also the {} file: give each output its own path",
                                      out.option, out.path, outputs[j].option));
  }
  for (const FileRole& out : outputs) probe_output(out.what.empty() ? out.option : out.what, out.path);
  for (const FileRole& out : outputs) claim_output(out.option, out.path, wait, taken);
}

namespace {

// The claims this process holds: listening sockets, closed when it exits (however),
// or by release_claims (a library caller's threads: under the lock).
std::vector<int>& claims() {
  static std::vector<int> fds;
  return fds;
}
std::mutex g_claims_lock;

}  // namespace

namespace {

// Who holds the claim at `addr`: "another run (pid N)", or "another run" where the
// holder cannot be asked.
std::string claim_holder(const sockaddr_un& addr, socklen_t len) {
  // Non-blocking: the holder never accepts, so once its backlog is full a blocking
  // connect would wait for as long as that run lasts.
  std::string who = "another run";
  if (const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      probe >= 0) {
    ucred cred{};
    socklen_t n = sizeof cred;
    if (::connect(probe, reinterpret_cast<const sockaddr*>(&addr), len) == 0 &&
        ::getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cred, &n) == 0 && cred.pid > 0)
      who = fmt::format("another run (pid {})", cred.pid);
    ::close(probe);
  }
  return who;
}

}  // namespace

void claim_output(std::string_view option, const std::string& given,
                  std::chrono::milliseconds wait, std::vector<int>* taken) {
  if (given.empty()) return;
  const detail::OutputTarget target = detail::output_target(given);
  if (target.kind != detail::OutputTarget::Kind::replace) return;  // a stream, a device
  namespace fs = std::filesystem;
  std::error_code e;
  const std::string path = fs::weakly_canonical(fs::absolute(target.path), e).string();
  // The name: "hogwild-output:" and a hash of the absolute path, in the abstract
  // namespace (a leading NUL: nothing on disk, gone with the last process that holds
  // it, a SIGKILLed one too; the workers inherit it).
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : path) h = (h ^ c) * 0x100000001b3ull;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = fmt::format("hogwild-output:{:016x}", h);
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const auto deadline = std::chrono::steady_clock::now() + wait;
  bool said = false;
  for (;;) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;  // no sockets here: no claim, as before
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0 && ::listen(fd, 4) == 0) {
      {
        const std::lock_guard held(g_claims_lock);
        claims().push_back(fd);
      }
      if (taken) taken->push_back(fd);
      return;
    }
    const int err = errno;
    ::close(fd);
    if (err != EADDRINUSE) return;
    const std::string who = claim_holder(addr, len);
    if (std::chrono::steady_clock::now() >= deadline)
      throw ConfigError(fmt::format("{} {}: {} writes it now; give this run another path, or wait "
                                    "for that one to end", option, given, who));
    if (!said)
      fmt::print(stderr, "hogwild_train: {} {}: {} writes it now; waiting up to {} s for it to end\n",
                 option, given, who, std::chrono::duration_cast<std::chrono::seconds>(wait).count());
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void release_claims(const std::vector<int>& taken) noexcept {
  const std::lock_guard held(g_claims_lock);
  for (const int fd : taken) {
    std::erase(claims(), fd);
    ::close(fd);
  }
}

void probe_output(std::string_view what, const std::string& given) {
  namespace fs = std::filesystem;
  if (given.empty()) return;
  const detail::OutputTarget target = detail::output_target(given);
  // A descriptor, device or pipe is written in place: nothing to probe.
  if (target.kind != detail::OutputTarget::Kind::replace) return;
  const std::string& path = target.path;  // links followed: the file they lead to
  std::error_code e;
  if (fs::is_directory(fs::status(path, e)))
    throw IoError(fmt::format("cannot write {} to {}: it is a directory", what, given));
  const auto dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, e))
    throw IoError(fmt::format("cannot write {} to {}: no directory {}", what, given, dir.string()));
  // A temporary a killed writer left beside the file goes now.
  detail::remove_stale_temporaries(path);
  const std::string probe = path + ".tmp." + std::to_string(::getpid());
  // SIGINT and SIGTERM wait until the probe is gone, so that they never leave it.
  sigset_t stops, old;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &stops, &old);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const int err = errno;
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (fd < 0) throw IoError(fmt::format("cannot write {} to {}: {}", what, given, std::strerror(err)));
}

}  // namespace hogwild::tools
