// Worker start-up behind one small interface: a ProcessGroup starts a worker by
// plain fork of the parent (a closure over its memory: the CPU runs' default), or
// through the fork server, a process forked first thing in main, before any thread,
// that forks a worker from a description in bytes and descriptors (what a parent
// that started TBB, CUDA, NCCL or Gloo, none of which survive fork, must use).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hogwild::detail {

struct WorkerExit {
  unsigned rank;
  pid_t pid;
  int status;  // as from waitpid
  bool ok() const;
  std::string describe() const;  // "exited with status 3" / "was killed by signal 9 (Killed)"
};

// What the fork server runs in each worker it forks: the worker's rank, the bytes
// and descriptors of its description (the worker owns the descriptors); returns the
// worker's exit status.
using WorkerEntry = int (*)(unsigned rank, std::string_view description, std::span<const int> fds);

// The fork server: a single-threaded process forked by start() and kept for the
// life of the program. It forks each worker it is asked for, runs `entry` there, and
// reports the worker's pid and, later, its wait status. Its workers die with it, and
// it dies with the program (PR_SET_PDEATHSIG, and the end of its socket); it ignores
// SIGINT and SIGTERM so that it outlives a process-group signal long enough to report
// how its workers ended. One ProcessGroup at a time uses it.
class ForkServer {
 public:
  // Forks the server (once; later calls do nothing). Call it before any thread
  // starts: the server is a copy of the process as it is then. In a process forked
  // from one that had started it, the call starts that process's own. With
  // `program` (not null), the forked child execs that program, which calls
  // fork_server_main() (fork_server.hpp); where the exec fails the child serves as a
  // copy, as without it.
  static void start(WorkerEntry entry, const char* program = nullptr);
  // This process's server, or null when start() was not called here.
  static ForkServer* get() noexcept;
  pid_t pid() const noexcept { return pid_; }

  struct Report {
    unsigned rank;
    pid_t pid;     // the worker's, or -errno when the server could not fork it
    int status;    // wait status (for an exit report)
    bool exited;   // false: the reply to a start request
  };
  // Asks for a worker; returns its pid. Exit reports that come first are queued.
  pid_t start_worker(unsigned rank, std::string_view description, const std::vector<int>& fds);
  // Exit reports received so far (waiting up to `timeout_ms` for the first; -1: for ever).
  std::vector<Report> exits(int timeout_ms);
  // Waits up to timeout_ms (less when a signal comes) for a report to read.
  void wait(int timeout_ms);
  std::mutex& user() noexcept { return user_; }

 private:
  ForkServer(pid_t pid, int socket) : pid_(pid), socket_(socket) {}
  bool receive(int timeout_ms);  // one report into queue_; false on timeout
  pid_t owner_ = getpid();  // the process that started it (a fork of it has none)
  pid_t pid_;
  int socket_;
  std::deque<Report> queue_;
  std::mutex user_;  // held by the ProcessGroup using the server
};

// The body of a fork server started by exec: `socket` is its end of the program's
// socket, `program` the pid of the process that started it (it ends with it).
[[noreturn]] void serve_forks(int socket, WorkerEntry entry, pid_t program);

class ProcessGroup {
 public:
  // Workers by plain fork (spawn), or through `server` (start) when not null.
  explicit ProcessGroup(ForkServer* server = nullptr);
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  // Kills (SIGKILL) and reaps every worker still running.
  ~ProcessGroup();

  // Forks a worker that runs `body` and _exit()s with its return value; an
  // exception escaping `body` is printed and becomes exit status 1. The child dies
  // with the parent (PR_SET_PDEATHSIG), ignores SIGINT (the parent decides) and
  // turns SIGTERM into worker_terminated(); other signals take their defaults.
  pid_t spawn(unsigned rank, const std::function<int()>& body);
  // Starts a worker through the fork server from its description.
  pid_t start(unsigned rank, std::string_view description, const std::vector<int>& fds);
  bool through_server() const noexcept { return server_ != nullptr; }

  // Reaps workers that have ended, without blocking.
  std::vector<WorkerExit> reap();
  // Waits until a worker has ended (reap() then has it), timeout_ms passed or a
  // signal arrived, whichever is first: a supervisor's pause that does not add its
  // length to the end of a run (a pidfd per forked worker, the server's socket for
  // the fork server's).
  void wait(int timeout_ms);
  std::size_t running() const noexcept { return running_; }
  // The pids of the workers still running (not yet reaped).
  std::vector<pid_t> pids() const;
  // The ranks and pids of the workers still running.
  std::vector<std::pair<unsigned, pid_t>> running_workers() const;
  void kill_all(int sig) noexcept;
  // Reaps every worker, blocking.
  void wait_all() noexcept;

 private:
  struct Child {
    unsigned rank;
    pid_t pid;
    bool done;
    int pidfd;  // readable once the worker has ended; -1: none (the fork server's, or no pidfd_open)
  };
  void done(pid_t pid, int status, std::vector<WorkerExit>* out);
  std::vector<Child> children_;
  std::size_t running_ = 0;
  ForkServer* server_ = nullptr;
  std::unique_lock<std::mutex> server_lock_;
};

// Set in a worker by SIGTERM: its loop ends the batch, publishes its place and the
// worker exits kExitTerminated. Always 0 outside workers.
const std::atomic<std::int32_t>& worker_terminated() noexcept;

// One message on a Unix stream socket with file descriptors beside it
// (SCM_RIGHTS): how a process that did not fork from the run's parent (a fork
// server's worker) receives the arena's handle. send_message writes all of
// `bytes`; recv_message reads exactly `size` bytes into `out` and returns the
// descriptors that came with them (at most 8; the receiver owns them), or throws
// ResourceError when the peer closed the socket or an error occurred.
void send_message(int socket, const void* bytes, std::size_t size, const std::vector<int>& fds = {});
std::vector<int> recv_message(int socket, void* out, std::size_t size);

// Pins the calling process to one CPU: the (rank mod n)-th of the n CPUs it may run
// on. Returns that CPU's number, or -1 (and changes nothing) if affinity cannot be set.
int pin_to_cpu(unsigned rank) noexcept;

// True when `parent` is non-zero and no longer this process's parent: a worker
// whose parent died stops within 64 mini-batches even if PR_SET_PDEATHSIG missed.
bool orphaned(std::int32_t parent) noexcept;
// In a worker, the process that forked it (the run's parent, or the fork server);
// 0 in any other process.
std::int32_t launcher() noexcept;
// A process's share of the anonymous and shared-memory pages it maps (Pss_Anon and
// Pss_Shmem of /proc/PID/smaps_rollup; 0 for `pid` 0: this process): summed over
// processes at one moment, every page counts once. Page cache (the program's files,
// a mapped input) is left out. ok = false when the process is gone.
struct MemoryShare {
  std::uint64_t anon = 0, shmem = 0;
  bool ok = false;
  std::uint64_t bytes() const noexcept { return anon + shmem; }
};
MemoryShare memory_share(pid_t pid = 0);
// This process's resident anonymous and shared-memory bytes (/proc/self/status's
// RssAnon and RssShmem: counters the kernel keeps, read without walking page
// tables), in a MemoryShare's fields.
MemoryShare resident_counters();
// Bytes of /proc/meminfo's MemAvailable (0 if unknown), and of a process's VmSize
// and RssAnon (/proc/PID/status; `pid` 0: this process).
std::uint64_t mem_available_bytes();
std::uint64_t address_space_bytes(pid_t pid = 0);
std::uint64_t anon_bytes(pid_t pid = 0);

// Proportional set size of this process (/proc/self/smaps_rollup), 0 if unknown.
std::uint64_t self_pss_bytes();
// Peak resident set size of this process (VmHWM).
std::uint64_t self_peak_rss_bytes();

}  // namespace hogwild::detail
