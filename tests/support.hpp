// Helpers shared by the tests: temporary folders, the shared real datasets (skipped
// with a message where ../shared/data is absent), running the CLIs, /dev/shm checks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/sanitizers.hpp"
#include "hogwild/trainer.hpp"

namespace hogwild::test {

#if defined(HOGWILD_TSAN)
// Under TSan the CLI's TBB parsing threads (Debian's TBB is not instrumented) are
// reported as races: tests that run hogwild_train skip themselves there.
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#if defined(HOGWILD_ASAN) || defined(HOGWILD_TSAN)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
// Marks the running test case skipped (it cannot run here: no AMX, no ../shared,
// not root, ...): prints "SKIPPED: <why>" and counts it; the caller then returns.
// A test executable that skipped a case and failed none exits 77, which meson
// reports as SKIP, never as a pass. Such cases carry a doctest test_suite
// ("amx", "shared_data", "cli", ...) that tests/meson.build registers as a test of
// its own, so that a skip does not hide the passes of the cases beside it.
void skip(const std::string& why);
// True (after skip()) when the CLI cannot run under this build.
bool skip_cli_under_tsan();
// Under TSan: skip() a case whose process runs TBB threads (libtbb is not
// instrumented, so TSan reports its synchronisation as races); true when skipped.
bool skip_threads_under_tsan();
// Under a sanitizer: skip() a statistical case (convergence of long runs measured
// against bounds), true when skipped. Its code paths run under the sanitizer in the
// short cases beside it; its hundreds of thousands of examples, 3-30x slower there,
// are what made the sanitizer stages run past CI's hour. Such cases sit in the
// doctest test_suite "statistics" (a meson test of its own, SKIP there).
bool skip_statistics_under_sanitizers();

// A fresh temporary directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void write_text(const std::string& path, const std::string& text);
void write_gzip(const std::string& path, const std::string& bytes);
std::string read_text(const std::string& path);

// Folder of the shared real datasets, or nullopt (after skip(): the caller
// returns) when absent.
std::optional<std::filesystem::path> shared_data();

struct RunResult {
  int exit_code = -1;  // -signal when killed
  std::string out;     // stdout and stderr together
};
// Runs argv (argv[0] is a path) with a hang guard; stdout+stderr captured.
RunResult run(const std::vector<std::string>& argv, double timeout_seconds = 240);
// Paths of the built CLIs (from the environment meson sets).
std::string hogwild_train_path();
std::string hogwild_data_path();
// Runs hogwild_train with `args` and then `more` (a case's common options, then
// what one run adds).
RunResult run_train(const std::vector<std::string>& args, const std::vector<std::string>& more = {},
                    double timeout_seconds = 240);

// Three classes of dense rows (labels 0, 1, 2 in turn): standard normal values
// plus 0.7 on the columns j with j mod 3 == the class (about 0.9 accuracy).
Dataset class_blobs(std::size_t rows, std::size_t cols, std::uint64_t seed);
// Dense rows of `cols` standard-normal values (Rng(seed)), one per label.
Dataset gaussian_rows(const std::vector<float>& labels, std::size_t cols, std::uint64_t seed);
// Rows [begin, end) of a dataset as a dataset of its own.
Dataset slice(const Dataset& d, std::size_t begin, std::size_t end, const std::string& name);
// A generated sparse problem split into train (first n_train rows) and test.
std::pair<Dataset, Dataset> generated_problem(std::size_t n_train, std::size_t n_test,
                                              std::size_t features, std::size_t nnz,
                                              double noise, std::uint64_t seed);

// The sparse logistic configuration the option tests (hot coordinates, replicas)
// compare against serial on generated_problem data: 8 epochs at lr 0.5 x 0.8 per
// epoch, seed 7.
TrainConfig sgd_config(Mode mode, unsigned workers);

// Names in /dev/shm created by this tool ("hogwild-" prefix).
std::vector<std::string> our_shm_entries();
// How many entries a directory holds (a FileStore rendezvous: its keys).
std::size_t entries_in(const std::filesystem::path& dir);

// Writes a generated problem as libsvm files in `dir`; returns {train, test}.
std::pair<std::string, std::string> problem_files(const TempDir& dir, std::size_t rows,
                                                  std::size_t features = 2000);
// Children of `pid` (its workers), from /proc.
std::vector<pid_t> children_of(pid_t pid);
struct Background {
  pid_t pid;
  std::string out_path;  // its stdout and stderr
};
// Starts hogwild_train with `args`, output to dir/out_name, without waiting.
// With own_group, in a process group of its own (its pid), as a service manager or
// `timeout` starts it, so that kill(-pid, sig) reaches it and its workers.
Background start_train(const std::vector<std::string>& args, const TempDir& dir,
                       const std::string& out_name = "out.txt", bool own_group = false);
// The same for any program (argv[0] its path), with SIGINT and SIGTERM at their
// default actions whatever this process does with them.
Background start_program(std::vector<std::string> argv, const TempDir& dir,
                         const std::string& out_name = "out.txt", bool own_group = false);
// Waits until the file at `path` holds `text` (polled every 2 ms for up to
// `seconds`); false if it never did.
bool wait_for_text(const std::string& path, const std::string& text, double seconds);
// Waits for `n` workers to exist (and to be past start-up), up to a few seconds.
std::vector<pid_t> wait_for_workers(pid_t parent, std::size_t n);
// waitpid with a deadline; returns the exit code, -signal, or -1000 on a hang.
int wait_exit(pid_t pid, double seconds);
// True once `pid` is gone or a zombie.
bool gone(pid_t pid);
// True once every one of `pids` is gone (polled every 10 ms for up to `seconds`).
bool all_gone_within(const std::vector<pid_t>& pids, double seconds);

// A TCP port on 127.0.0.1 that nothing listens on (now), and whether one accepts.
int free_port();
bool accepts(int port);

inline constexpr const char* kRedisServer = "/usr/bin/redis-server";
// A redis-server of the calling test alone (Debian's, kRedisServer), on a free
// port of 127.0.0.1, keeping nothing on disk but in `dir`; stopped and reaped with
// this object. The caller skips where kRedisServer is not installed.
class RedisServer {
 public:
  explicit RedisServer(const TempDir& dir);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // How many keys it holds (redis's DBSIZE, asked over a socket of our own).
  long keys() const;

 private:
  int port_;
  pid_t pid_ = -1;
};

// Forks a child that runs fn and _exits with what it returns; an exception there
// is printed and exits 100 + its exit code (hogwild::Error) or 1.
pid_t fork_child(const std::function<int()>& fn);

// A process the test starts afresh, as a new run of this test binary (fork, then
// exec of /proc/self/exe): a program's state as a node of its own (its own fork
// server, say), which a fork of the test process would share. Register an entry at
// namespace scope; main then runs it, instead of the tests, when the binary is
// started as "<binary> --child <name> <args...>", and exits with what it returns
// (an exception: printed, exit 100 + its exit code, or 1).
struct ChildEntry {
  ChildEntry(const char* name, std::function<int(const std::vector<std::string>&)> fn);
};
// Starts entry `name` with `args`; its pid (wait_exit it).
pid_t spawn_child(const std::string& name, const std::vector<std::string>& args);

// `n` bytes of zeroed shared anonymous memory (a forked child sees the same bytes),
// unmapped with the object.
struct SharedBytes {
  std::span<std::byte> bytes;
  explicit SharedBytes(std::size_t n);
  ~SharedBytes();
  SharedBytes(const SharedBytes&) = delete;
  SharedBytes& operator=(const SharedBytes&) = delete;
};

// A connected pair of Unix stream sockets, closed with this object: made before a
// fork, it needs no name (how descriptors travel to workers, SCM_RIGHTS).
struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair();
  ~SocketPair();
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
};

// A flag in a shared anonymous page, the same one in the test process and every
// worker it forks (tests use it to crash a worker once per run).
std::atomic<int>& shared_flag();

}  // namespace hogwild::test
