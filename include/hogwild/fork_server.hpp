// Worker start-up through a fork server. By default a run's workers are plain forks
// of the training process (WorkerStart::fork: the fastest start, and a worker shares
// the parent's data pages). A process that has started threads (a TBB pool, an
// OpenMP team) or a library that does not survive fork (CUDA, NCCL, Gloo) cannot
// fork workers safely; such a program calls start_fork_server() first thing in
// main, before any of those start, and trains with WorkerStart::fork_server: each
// worker is then forked by that clean, single-threaded process and started from a
// description (its rank, the configuration, the arena's handle, the rows' handles),
// and so is a worker restarted after a crash.
#pragma once

#include <cstdint>
#include <string>

namespace hogwild {

enum class WorkerStart : std::uint8_t { fork, fork_server };
const char* to_string(WorkerStart s) noexcept;
WorkerStart parse_worker_start(const std::string& name);  // ConfigError on anything else

// Forks the fork server (once; later calls do nothing). Call it before any thread
// starts: the server is a copy of the program as it is at that moment, and every
// worker it starts makes its model by name (make_model), so a model registered
// later is unknown to it. It lives as long as the program and ends with it.
void start_fork_server();
// As start_fork_server(), but the server is `program`, a small executable whose
// main returns fork_server_main(argc, argv) (the Python module ships one beside
// itself): forked, then exec'd, it holds none of this process's memory. Forking a
// worker from it, the worker's exit and the memory meter's reading of both then
// cost what they cost for a small program, whatever this process has grown to
// (a Python interpreter with numpy and scipy loaded: about 100 MB, and each reading
// of its page tables about 2 ms). Such a server knows the built-in models and
// device kernels only: where this process registered one of its own, or `program`
// cannot be run, the server is a copy of this process, as start_fork_server()'s.
void start_fork_server(const std::string& program);
// The main of such a program: serves the socket its arguments name, for the
// process they name, and never returns; 2 with a message when run by hand.
int fork_server_main(int argc, char** argv);
// The server's pid, or 0 when start_fork_server() was not called.
std::int32_t fork_server_pid() noexcept;

}  // namespace hogwild
