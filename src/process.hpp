// Worker start-up behind one small interface. CPU runs fork the parent directly;
// the interface leaves room for a fork server (for runs whose parent initialised
// CUDA or a communicator, which do not survive fork).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hogwild::detail {

struct WorkerExit {
  unsigned rank;
  pid_t pid;
  int status;  // as from waitpid
  bool ok() const;
  std::string describe() const;  // "exited with status 3" / "was killed by signal 9 (Killed)"
};

class ProcessGroup {
 public:
  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  // Kills (SIGKILL) and reaps every worker still running.
  ~ProcessGroup();

  // Forks a worker that runs `body` and _exit()s with its return value; an
  // exception escaping `body` is printed and becomes exit status 1. The child dies
  // with the parent (PR_SET_PDEATHSIG), ignores SIGINT (the parent decides) and
  // turns SIGTERM into worker_terminated(); other signals take their defaults.
  pid_t spawn(unsigned rank, const std::function<int()>& body);

  // Reaps workers that have ended, without blocking.
  std::vector<WorkerExit> reap();
  std::size_t running() const noexcept { return running_; }
  void kill_all(int sig) noexcept;
  // Reaps every worker, blocking.
  void wait_all() noexcept;

 private:
  struct Child {
    unsigned rank;
    pid_t pid;
    bool done;
  };
  std::vector<Child> children_;
  std::size_t running_ = 0;
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
// Throws ResourceError when `shared_bytes` (the arena's pages) plus `private_bytes`
// (the parent's evaluation copy) plus `workers` times `replica_bytes` (each
// worker's replica, --merge-every) do not fit in the memory available (MemAvailable
// in /proc/meminfo), or when one process's part does not fit in the address-space
// limit (RLIMIT_AS, ulimit -v) left to this process.
void check_memory(std::uint64_t shared_bytes, std::uint64_t private_bytes,
                  std::uint64_t replica_bytes = 0, unsigned workers = 0);

// Proportional set size of this process (/proc/self/smaps_rollup), 0 if unknown.
std::uint64_t self_pss_bytes();
// Bytes mapped by this process alone (Private_Clean + Private_Dirty of
// /proc/self/smaps_rollup): what a forked worker adds to its parent's footprint.
std::uint64_t self_private_bytes();
// Peak resident set size of this process (VmHWM).
std::uint64_t self_peak_rss_bytes();

}  // namespace hogwild::detail
