#include "process.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <fstream>
#include <string>

#include "hogwild/error.hpp"
#include "hogwild/model_base.hpp"

namespace hogwild::detail {

namespace {

std::atomic<std::int32_t> g_terminated{0};  // this worker got SIGTERM (lock-free: signal-safe)

extern "C" void on_worker_term(int) { g_terminated.store(1, std::memory_order_relaxed); }

}  // namespace

const std::atomic<std::int32_t>& worker_terminated() noexcept { return g_terminated; }

bool WorkerExit::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string WorkerExit::describe() const {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("ended with wait status {}", status);
}

ProcessGroup::~ProcessGroup() {
  kill_all(SIGKILL);
  wait_all();
}

pid_t ProcessGroup::spawn(unsigned rank, const std::function<int()>& body) {
  const pid_t parent = getpid();
  std::fflush(nullptr);  // no buffered output duplicated into the child
  pid_t pid = fork();
  if (pid < 0) throw ResourceError(fmt::format("cannot fork worker {}: {}", rank, std::strerror(errno)));
  if (pid == 0) {
    // The child: die with the parent, and never return into the parent's stack.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(kExitWorkerFailed);
    sigset_t none;
    sigemptyset(&none);
    for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) signal(s, SIG_DFL);
    // The parent handles SIGINT for the whole group: a ^C at the terminal reaches
    // every process, and workers must not die before the parent decides. SIGTERM
    // (systemd, timeout: the whole process group) ends the worker's batch, and the
    // worker publishes its place and exits kExitTerminated.
    signal(SIGINT, SIG_IGN);
    g_terminated.store(0, std::memory_order_relaxed);
    struct sigaction term {};
    term.sa_handler = on_worker_term;
    sigemptyset(&term.sa_mask);
    sigaction(SIGTERM, &term, nullptr);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int code = kExitFailure;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hogwild: worker %u: %s\n", rank, e.what());
      code = kExitFailure;
    } catch (...) {
      std::fprintf(stderr, "hogwild: worker %u: unknown exception\n", rank);
    }
    std::fflush(nullptr);
    _exit(code);
  }
  children_.push_back({rank, pid, false});
  ++running_;
  return pid;
}

std::vector<WorkerExit> ProcessGroup::reap() {
  std::vector<WorkerExit> out;
  for (auto& c : children_) {
    if (c.done) continue;
    int status = 0;
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) {
      c.done = true;
      --running_;
      out.push_back({c.rank, c.pid, status});
    }
  }
  return out;
}

void ProcessGroup::kill_all(int sig) noexcept {
  for (auto& c : children_)
    if (!c.done) kill(c.pid, sig);
}

void ProcessGroup::wait_all() noexcept {
  for (auto& c : children_) {
    if (c.done) continue;
    int status;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    c.done = true;
    --running_;
  }
}

namespace {
constexpr std::size_t kMaxFds = 8;
}  // namespace

void send_message(int socket, const void* bytes, std::size_t size, const std::vector<int>& fds) {
  HOGWILD_ENFORCE(fds.size() <= kMaxFds, "too many descriptors for one message");
  const auto* p = static_cast<const char*>(bytes);
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  bool with_fds = !fds.empty();
  while (size > 0) {
    iovec iov{const_cast<char*>(p), size};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (with_fds) {  // the descriptors ride with the first byte
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw ResourceError(fmt::format("cannot send to the worker socket: {}", std::strerror(errno)));
    with_fds = false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

std::vector<int> recv_message(int socket, void* out, std::size_t size) {
  std::vector<int> fds;
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
    iovec iov{p, size};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) throw ResourceError("the worker socket closed mid-message");
    if (n < 0) throw ResourceError(fmt::format("cannot read the worker socket: {}", std::strerror(errno)));
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < k; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          fds.push_back(fd);
        }
      }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return fds;
}

int pin_to_cpu(unsigned rank) noexcept {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  const int n = CPU_COUNT(&allowed);
  if (n <= 0) return -1;
  int want = static_cast<int>(rank % static_cast<unsigned>(n));
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || want-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
  }
  return -1;
}
bool orphaned(std::int32_t parent) noexcept { return parent != 0 && getppid() != parent; }

static std::uint64_t read_kib_field(const char* path, const char* field) {
  std::ifstream f(path);
  std::string line;
  const std::size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0) return std::stoull(line.substr(n)) * 1024;
  return 0;
}

std::uint64_t self_pss_bytes() { return read_kib_field("/proc/self/smaps_rollup", "Pss:"); }
std::uint64_t self_private_bytes() {
  // One pass: the kernel walks every mapping (every data page) for each read.
  std::ifstream f("/proc/self/smaps_rollup");
  std::string line;
  std::uint64_t kib = 0;
  while (std::getline(f, line))
    if (line.rfind("Private_Clean:", 0) == 0 || line.rfind("Private_Dirty:", 0) == 0)
      kib += std::stoull(line.substr(14));
  return kib * 1024;
}
std::uint64_t self_peak_rss_bytes() { return read_kib_field("/proc/self/status", "VmHWM:"); }

}  // namespace hogwild::detail

namespace hogwild::detail {

static std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

void check_memory(std::uint64_t shared_bytes, std::uint64_t private_bytes,
                  std::uint64_t replica_bytes, unsigned workers) {
  const std::uint64_t replicas = replica_bytes * workers;
  const std::uint64_t need = shared_bytes + private_bytes + replicas;
  const std::string what = fmt::format(
      "the model needs {} of memory ({} shared parameter arena, {} private copy for "
      "evaluation{})", mib(need), mib(shared_bytes), mib(private_bytes),
      replicas ? fmt::format(", {} for {} workers' replicas (--merge-every)", mib(replicas), workers)
               : std::string());
  const std::uint64_t avail = read_kib_field("/proc/meminfo", "MemAvailable:");
  if (avail != 0 && need > avail)
    throw ResourceError(fmt::format("{} but only {} is available; use a smaller model (fewer "
                                    "features or classes) or a machine with more memory",
                                    what, mib(avail)));
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const std::uint64_t used = read_kib_field("/proc/self/status", "VmSize:");
    const std::uint64_t left = as.rlim_cur > used ? as.rlim_cur - used : 0;
    if (shared_bytes + std::max(private_bytes, replica_bytes) > left)
      throw ResourceError(fmt::format("{} but the address-space limit (ulimit -v) leaves only {}; "
                                      "raise the limit or use a smaller model",
                                      what, mib(left)));
  }
}

}  // namespace hogwild::detail
