#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <fstream>
#include <string>
#include <string_view>

#include "hogwild/error.hpp"
#include "hogwild/model_base.hpp"

namespace hogwild::detail {

namespace {

std::atomic<std::int32_t> g_terminated{0};  // this worker got SIGTERM (lock-free: signal-safe)
std::int32_t g_launcher = 0;                 // in a worker: the process that forked it

constexpr std::size_t kMaxFds = 8;  // descriptors in one message

// One recvmsg into [buf, buf + size): the bytes received (0 at the peer's end, -1
// on error, errno set), the descriptors that came with them appended to `fds`;
// `truncated` (if given) says the message did not fit (SOCK_SEQPACKET).
ssize_t recv_once(int socket, void* buf, std::size_t size, std::vector<int>& fds,
                  bool* truncated = nullptr) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  iovec iov{buf, size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = n >= 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      for (std::size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
  if (truncated) *truncated = n >= 0 && (msg.msg_flags & MSG_TRUNC);
  return n;
}

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

namespace {

// A freshly forked worker: dies with `parent` (false when that is already gone),
// ignores SIGINT and SIGHUP (the parent handles a ^C or a hang-up, which reach every
// process of the terminal's group, and decides), and turns SIGTERM (systemd, timeout: the whole
// process group) into worker_terminated(): the worker ends its batch, publishes its
// place and exits kExitTerminated. Other signals take their defaults.
bool become_worker(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return false;
  g_launcher = parent;
  for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) signal(s, SIG_DFL);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  g_terminated.store(0, std::memory_order_relaxed);
  struct sigaction term {};
  term.sa_handler = on_worker_term;
  sigemptyset(&term.sa_mask);
  sigaction(SIGTERM, &term, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  return true;
}

// Runs a worker's body and ends the process with its status (an exception is
// printed, and exits with a hogwild::Error's code or 1); never returns into the
// forking process's stack.
[[noreturn]] void run_worker(unsigned rank, const std::function<int()>& body) {
  int code = kExitFailure;
  try {
    code = body();
  } catch (const Error& e) {  // bad input 2 (not worth a restart), a failed peer 3, ...
    std::fprintf(stderr, "hogwild: worker %u: %s\n", rank, e.what());
    code = e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hogwild: worker %u: %s\n", rank, e.what());
    code = kExitFailure;
  } catch (...) {
    std::fprintf(stderr, "hogwild: worker %u: unknown exception\n", rank);
  }
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace

ProcessGroup::ProcessGroup(ForkServer* server) : server_(server) {
  if (!server_) return;
  server_lock_ = std::unique_lock(server_->user(), std::try_to_lock);
  if (!server_lock_.owns_lock())
    throw ConfigError("the fork server is serving another run of this process; start one run "
                      "through it at a time");
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
    if (!become_worker(parent)) _exit(kExitWorkerFailed);
    run_worker(rank, body);
  }
  // A descriptor that polls readable when the child ends (Linux 5.3); without one,
  // wait() sleeps its timeout out.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  children_.push_back({rank, pid, false, pidfd});
  ++running_;
  return pid;
}

pid_t ProcessGroup::start(unsigned rank, std::string_view description, const std::vector<int>& fds) {
  HOGWILD_ENFORCE(server_ != nullptr, "ProcessGroup::start needs the fork server");
  const pid_t pid = server_->start_worker(rank, description, fds);
  children_.push_back({rank, pid, false, -1});
  ++running_;
  return pid;
}

void ProcessGroup::done(pid_t pid, int status, std::vector<WorkerExit>* out) {
  for (auto& c : children_)
    if (!c.done && c.pid == pid) {
      c.done = true;
      if (c.pidfd >= 0) ::close(c.pidfd);
      c.pidfd = -1;
      --running_;
      if (out) out->push_back({c.rank, c.pid, status});
    }
}

std::vector<WorkerExit> ProcessGroup::reap() {
  std::vector<WorkerExit> out;
  if (server_) {
    for (const auto& r : server_->exits(0)) done(r.pid, r.status, &out);
    return out;
  }
  for (auto& c : children_) {
    if (c.done) continue;
    int status = 0;
    if (waitpid(c.pid, &status, WNOHANG) == c.pid) done(c.pid, status, &out);
  }
  return out;
}

void ProcessGroup::wait(int timeout_ms) {
  if (server_) return server_->wait(timeout_ms);
  std::vector<pollfd> fds;
  for (const auto& c : children_) {
    if (c.done) continue;
    if (c.pidfd < 0) {  // a worker without a pidfd: its end is seen at the timeout
      fds.clear();
      break;
    }
    fds.push_back({c.pidfd, POLLIN, 0});
  }
  if (fds.empty()) {
    timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);  // a signal cuts it short, as it does the poll
    return;
  }
  (void)::poll(fds.data(), fds.size(), timeout_ms);  // EINTR: a signal, for the caller to see
}

std::vector<pid_t> ProcessGroup::pids() const {
  std::vector<pid_t> out;
  for (const auto& c : children_)
    if (!c.done) out.push_back(c.pid);
  return out;
}

std::vector<std::pair<unsigned, pid_t>> ProcessGroup::running_workers() const {
  std::vector<std::pair<unsigned, pid_t>> out;
  for (const auto& c : children_)
    if (!c.done) out.emplace_back(c.rank, c.pid);
  return out;
}

void ProcessGroup::kill_all(int sig) noexcept {
  for (auto& c : children_)
    if (!c.done) kill(c.pid, sig);
}

void ProcessGroup::wait_all() noexcept {
  if (server_) {
    try {
      while (running_ > 0)
        for (const auto& r : server_->exits(-1)) done(r.pid, r.status, nullptr);
    } catch (const std::exception&) {  // the server is gone, and its workers with it
      for (auto& c : children_) c.done = true;
      running_ = 0;
    }
    return;
  }
  for (auto& c : children_) {
    if (c.done) continue;
    int status;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    done(c.pid, status, nullptr);
  }
}

// The fork server's protocol, one SOCK_SEQPACKET message each way: a request (this
// header, the description's bytes, the descriptors beside them), and reports.
namespace {

struct RequestHeader {
  std::uint32_t rank;
  std::uint32_t bytes;
};
struct ReportWire {
  std::int32_t exited;
  std::uint32_t rank;
  std::int32_t pid;
  std::int32_t status;
};
constexpr std::size_t kMaxDescription = 60 * 1024;  // one message; a config is ~1 KiB
ForkServer* g_server = nullptr;

extern "C" void on_child(int) {}  // only to interrupt ppoll

void send_report(int socket, const ReportWire& r) {
  while (send(socket, &r, sizeof r, MSG_NOSIGNAL) < 0)
    if (errno != EINTR) _exit(0);  // the program is gone
}

constexpr std::int32_t kReady = 2;  // a report's `exited`: the server program runs

// The server's loop: reports ended workers, forks requested ones, and ends (its
// workers with it) when the program closes its end of the socket. `ready`: it
// first says it runs (a server started by exec, whose program waits to know).
[[noreturn]] void serve(int socket, WorkerEntry entry, pid_t program, bool ready) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != program) _exit(0);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  if (ready) send_report(socket, {kReady, 0, getpid(), 0});
  // Asleep until a request or a worker's end: SIGCHLD stays blocked but while ppoll
  // waits, so an end that comes between the reaping and the wait still wakes it.
  struct sigaction chld {};
  chld.sa_handler = on_child;
  sigemptyset(&chld.sa_mask);
  sigaction(SIGCHLD, &chld, nullptr);
  sigset_t only_chld, waiting;
  sigemptyset(&only_chld);
  sigaddset(&only_chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &only_chld, &waiting);
  sigdelset(&waiting, SIGCHLD);
  std::vector<std::pair<pid_t, unsigned>> workers;  // running: pid, rank
  std::vector<char> buf(sizeof(RequestHeader) + kMaxDescription);
  for (;;) {
    int status = 0;
    for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      auto it = std::find_if(workers.begin(), workers.end(), [&](auto& w) { return w.first == pid; });
      if (it == workers.end()) continue;
      send_report(socket, {1, it->second, pid, status});
      workers.erase(it);
    }
    pollfd pfd{socket, POLLIN, 0};
    if (ppoll(&pfd, 1, nullptr, &waiting) <= 0) continue;  // EINTR: a worker ended
    std::vector<int> fds;
    bool truncated = false;
    const ssize_t n = recv_once(socket, buf.data(), buf.size(), fds, &truncated);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // the program closed the socket (or it broke): end, workers first
      for (auto& w : workers) kill(w.first, SIGKILL);
      for (auto& w : workers) waitpid(w.first, &status, 0);
      _exit(0);
    }
    RequestHeader h{};
    const bool whole = static_cast<std::size_t>(n) >= sizeof h && !truncated;
    if (whole) std::memcpy(&h, buf.data(), sizeof h);
    if (!whole || sizeof h + h.bytes != static_cast<std::size_t>(n)) {
      for (int fd : fds) close(fd);
      send_report(socket, {0, h.rank, -EPROTO, 0});
      continue;
    }
    const pid_t server = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
      close(socket);
      if (!become_worker(server)) _exit(kExitWorkerFailed);
      const std::string_view description(buf.data() + sizeof h, h.bytes);
      run_worker(h.rank, [&] { return entry(h.rank, description, fds); });
    }
    for (int fd : fds) close(fd);
    if (pid > 0) workers.emplace_back(pid, h.rank);
    send_report(socket, {0, h.rank, pid > 0 ? pid : -errno, 0});
  }
}

}  // namespace

namespace {

// Whether a server started by exec says it runs within 10 s (its program loads the
// library: milliseconds), rather than closing its end or saying nothing.
bool said_ready(int socket) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd{socket, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    ReportWire w{};
    ssize_t n;
    while ((n = recv(socket, &w, sizeof w, 0)) < 0 && errno == EINTR) {
    }
    return n == static_cast<ssize_t>(sizeof w) && w.exited == kReady;
  }
}

}  // namespace

void ForkServer::start(WorkerEntry entry, const char* program_path) {
  if (g_server && g_server->owner_ == getpid()) return;
  if (g_server) {
    // A process forked from the program after it started its server (Python's
    // multiprocessing, os.fork): that server and its socket are the program's. Two
    // processes asking on one socket read each other's replies (both waited for
    // ever), and the workers of a killed child outlived it. This one gets its own;
    // its copy of the program's socket is closed (the server ends with the program).
    close(g_server->socket_);
    g_server = nullptr;  // the program's object, copied by fork: left, not freed
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw ResourceError(fmt::format("cannot make the fork server's socket: {}", std::strerror(errno)));
  const pid_t program = getpid();
  char socket_arg[16], program_arg[16];  // formatted before fork: the child only execs
  std::snprintf(socket_arg, sizeof socket_arg, "%d", sv[1]);
  std::snprintf(program_arg, sizeof program_arg, "%d", static_cast<int>(program));
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    throw ResourceError(fmt::format("cannot fork the fork server: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    close(sv[0]);
    if (program_path) {
      // The server as a small program of its own: it keeps the socket (not
      // close-on-exec) and learns it, and the program's pid, from its arguments.
      const int flags = fcntl(sv[1], F_GETFD);
      if (flags >= 0 && fcntl(sv[1], F_SETFD, flags & ~FD_CLOEXEC) == 0) {
        char* const argv[] = {const_cast<char*>(program_path), const_cast<char*>("--socket"),
                              socket_arg, const_cast<char*>("--program"), program_arg, nullptr};
        execv(program_path, argv);
        fcntl(sv[1], F_SETFD, flags);  // not run: serve as a copy of the program
      }
    }
    serve(sv[1], entry, program, program_path != nullptr);
  }
  close(sv[1]);
  if (program_path && !said_ready(sv[0])) {
    // Exec'd, but it ended or hangs before serving (its libraries not found, say):
    // the server is a copy of this process instead.
    close(sv[0]);
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    std::fprintf(stderr, "hogwild: the fork server program %s did not start; the fork server "
                 "is a copy of this process\n", program_path);
    return start(entry, nullptr);
  }
  g_server = new ForkServer(pid, sv[0]);  // for the life of the program
}

void serve_forks(int socket, WorkerEntry entry, pid_t program) {
  fcntl(socket, F_SETFD, FD_CLOEXEC);  // not into the workers' own execs, if any
  serve(socket, entry, program, true);
}

ForkServer* ForkServer::get() noexcept {
  return g_server && g_server->owner_ == getpid() ? g_server : nullptr;
}

pid_t ForkServer::start_worker(unsigned rank, std::string_view description, const std::vector<int>& fds) {
  if (description.size() > kMaxDescription)
    throw ConfigError(fmt::format("a worker's description has {} bytes, more than the fork "
                                  "server's {}", description.size(), kMaxDescription));
  HOGWILD_ENFORCE(fds.size() <= kMaxFds, "too many descriptors for the fork server");
  std::string bytes(sizeof(RequestHeader), '\0');
  const RequestHeader h{rank, static_cast<std::uint32_t>(description.size())};
  std::memcpy(bytes.data(), &h, sizeof h);
  bytes.append(description);
  send_message(socket_, bytes.data(), bytes.size(), fds);  // one message on SOCK_SEQPACKET
  for (;;) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (!it->exited) {
        const Report r = *it;
        queue_.erase(it);
        if (r.pid < 0)
          throw ResourceError(fmt::format("the fork server (pid {}) cannot start worker {}: {}",
                                          pid_, rank, std::strerror(-r.pid)));
        return r.pid;
      }
    receive(-1);
  }
}

bool ForkServer::receive(int timeout_ms) {
  pollfd pfd{socket_, POLLIN, 0};
  int ready;
  while ((ready = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready == 0) return false;
  ReportWire w{};
  ssize_t n;
  while ((n = recv(socket_, &w, sizeof w, 0)) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof w))
    throw WorkerError(fmt::format("the fork server (pid {}) is gone{}", pid_,
                                  n < 0 ? std::string(": ") + std::strerror(errno) : ""));
  queue_.push_back({w.rank, w.pid, w.status, w.exited != 0});
  return true;
}

void ForkServer::wait(int timeout_ms) {
  for (const auto& r : queue_)
    if (r.exited) return;
  pollfd pfd{socket_, POLLIN, 0};
  (void)::poll(&pfd, 1, timeout_ms);  // EINTR: a signal, for the caller to see
}

std::vector<ForkServer::Report> ForkServer::exits(int timeout_ms) {
  std::vector<Report> out;
  auto take = [&] {
    for (auto it = queue_.begin(); it != queue_.end();)
      if (it->exited) {
        out.push_back(*it);
        it = queue_.erase(it);
      } else {
        ++it;
      }
  };
  take();
  if (out.empty() && receive(timeout_ms)) take();
  while (receive(0)) take();
  return out;
}

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
    const ssize_t n = recv_once(socket, p, size, fds);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) throw ResourceError("the worker socket closed mid-message");
    if (n < 0) throw ResourceError(fmt::format("cannot read the worker socket: {}", std::strerror(errno)));
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
std::int32_t launcher() noexcept { return g_launcher; }

static std::uint64_t read_kib_field(const char* path, const char* field) {
  std::ifstream f(path);
  std::string line;
  const std::size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0) return std::stoull(line.substr(n)) * 1024;
  return 0;
}

std::uint64_t self_pss_bytes() { return read_kib_field("/proc/self/smaps_rollup", "Pss:"); }
std::uint64_t self_peak_rss_bytes() { return read_kib_field("/proc/self/status", "VmHWM:"); }

static std::string proc_file(pid_t pid, const char* name) {
  return pid ? fmt::format("/proc/{}/{}", pid, name) : fmt::format("/proc/self/{}", name);
}

// The anonymous and shared-memory figures of a /proc file: the lines that start
// with `anon` and `shmem` (kB).
static MemoryShare read_share(const std::string& path, std::string_view anon, std::string_view shmem) {
  std::ifstream f(path);
  MemoryShare m;
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(anon, 0) == 0) m.anon = std::stoull(line.substr(anon.size())) * 1024, m.ok = true;
    if (line.rfind(shmem, 0) == 0) m.shmem = std::stoull(line.substr(shmem.size())) * 1024;
  }
  return m;
}

MemoryShare memory_share(pid_t pid) {
  // One pass: the kernel walks every mapping's page tables for each read.
  return read_share(proc_file(pid, "smaps_rollup"), "Pss_Anon:", "Pss_Shmem:");
}

MemoryShare resident_counters() { return read_share("/proc/self/status", "RssAnon:", "RssShmem:"); }

std::uint64_t mem_available_bytes() { return read_kib_field("/proc/meminfo", "MemAvailable:"); }
std::uint64_t address_space_bytes(pid_t pid) {
  return read_kib_field(proc_file(pid, "status").c_str(), "VmSize:");
}
std::uint64_t anon_bytes(pid_t pid) {
  return read_kib_field(proc_file(pid, "status").c_str(), "RssAnon:");
}

}  // namespace hogwild::detail
