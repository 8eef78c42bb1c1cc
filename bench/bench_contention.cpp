// bench_contention: the machine's yardstick for contended cache lines (issue 36).
//
//   build/bench/bench_contention [--round-trips N] [--updates N] [--json FILE]
//
// Two measurements, each between processes (as hogwild_train's workers are), each
// process pinned to one core, on memory shared by an anonymous MAP_SHARED mapping:
//
// - Ping-pong: core 0 and core c take turns on one cache line (each waits for the
//   other's write, then writes): nanoseconds per round trip, for every other core
//   c. A round trip is two transfers of the line; on a multi-chiplet or
//   multi-socket machine the far cores show up here.
// - Updates: two processes on cores 0 and c each make N hogwild updates (a
//   relaxed load, an add, a relaxed store: the project's step on a weight) to a
//   hot float, each followed by 16 updates of floats of its own (the rest of an
//   example's row). The hot float is one both write (shared) or one of its own on
//   a line of its own (private): nanoseconds per example, and their ratio, what a
//   hot coordinate written by every worker costs against one written by one.
//
// Prints a table and the CPU's name; --json writes the figures.
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

bool pin(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// The cores this process may run on, in order.
std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  return cores;
}

// Memory shared with the children forked after it: `lines` cache lines, zeroed.
struct Shared {
  explicit Shared(std::size_t lines) : bytes(lines * 64) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the shared lines failed");
    base = static_cast<std::byte*>(p);
  }
  ~Shared() { munmap(base, bytes); }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  template <class T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(base + offset);
  }
  std::size_t bytes;
  std::byte* base = nullptr;
};

// Runs f(0) in a child pinned to core a and f(1) in one pinned to core b, both
// started behind a gate, and returns the seconds from the gate's opening to the
// last one's end (0 if a child failed).
template <class F>
double pair_run(int a, int b, std::atomic<int>& gate, F&& f) {
  gate.store(0);
  pid_t pids[2];
  for (int k = 0; k < 2; ++k) {
    pids[k] = fork();
    if (pids[k] == 0) {
      if (!pin(k == 0 ? a : b)) _exit(3);
      gate.fetch_add(1);
      while (gate.load() < 3) {
      }
      f(k);
      _exit(0);
    }
  }
  while (gate.load() < 2) {
  }
  const auto t0 = Clock::now();
  gate.store(3);
  bool ok = true;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? std::chrono::duration<double>(Clock::now() - t0).count() : 0;
}

}  // namespace

int main(int argc, char** argv) {
  long round_trips = 200000, updates = 2000000;
  std::string json_path;
  CLI::App app{"Cache-line contention between pinned processes: ping-pong and hogwild updates"};
  app.add_option("--round-trips", round_trips, "Ping-pong round trips a pair")->capture_default_str();
  app.add_option("--updates", updates, "Examples (a hot update and 16 of its own) each process makes")->capture_default_str();
  app.add_option("--json", json_path, "Write the figures to FILE");
  CLI11_PARSE(app, argc, argv);

  const std::vector<int> cores = allowed_cores();
  if (cores.size() < 2) {
    fmt::print("SKIP: fewer than two cores to run on\n");
    return 77;
  }
  Shared mem(4);  // line 0: the gate; 1: the ping-pong or the shared floats; 2, 3: private
  auto& gate = *new (mem.at<void>(0)) std::atomic<int>(0);
  nlohmann::json out{{"cpu", cpu_name()}, {"cores", cores.size()}};
  fmt::print("{}, {} cores; processes pinned to core {} and each other core\n\n", cpu_name(),
             cores.size(), cores[0]);
  fmt::print("| cores | ping-pong round trip, ns | example, hot float shared, ns | "
             "example, hot float private, ns | shared / private |\n|---|---|---|---|---|\n");
  for (std::size_t i = 1; i < cores.size(); ++i) {
    const int a = cores[0], b = cores[i];
    auto* ball = new (mem.at<void>(64)) std::atomic<long>(0);
    const double pp = pair_run(a, b, gate, [&](int k) {
      // k = 0 waits for even values and writes odd; k = 1 the reverse.
      for (long n = k; n < 2 * round_trips; n += 2) {
        while (ball->load(std::memory_order_acquire) != n) {
        }
        ball->store(n + 1, std::memory_order_release);
      }
    });
    // The project's hogwild step on a float: relaxed load, add, relaxed store.
    // Process k's hot float at first + k * stride bytes; its own floats in memory
    // of its own (a private heap after the fork).
    auto updater = [&](std::size_t first, std::size_t stride) {
      return [&, first, stride](int k) {
        std::atomic_ref<float> hot(*mem.at<float>(first + static_cast<std::size_t>(k) * stride));
        std::vector<float> own(16 * 16);
        for (long n = 0; n < updates; ++n) {
          hot.store(hot.load(std::memory_order_relaxed) + 1.0f, std::memory_order_relaxed);
          for (std::size_t j = 0; j < own.size(); j += 16) {  // a line each
            std::atomic_ref<float> r(own[j]);
            r.store(r.load(std::memory_order_relaxed) + 1.0f, std::memory_order_relaxed);
          }
        }
      };
    };
    const double shared = pair_run(a, b, gate, updater(64, 4));    // one line
    const double priv = pair_run(a, b, gate, updater(128, 64));  // two lines
    if (pp == 0 || shared == 0 || priv == 0) {
      fmt::print(stderr, "bench_contention: a child failed (pinning to core {} or {}?)\n", a, b);
      return 1;
    }
    const double rt_ns = pp / static_cast<double>(round_trips) * 1e9;
    const double shared_ns = shared / static_cast<double>(updates) * 1e9;
    const double priv_ns = priv / static_cast<double>(updates) * 1e9;
    out["pairs"].push_back({{"cores", {a, b}},
                            {"round_trip_ns", rt_ns},
                            {"example_hot_shared_ns", shared_ns},
                            {"example_hot_private_ns", priv_ns}});
    fmt::print("| {}-{} | {:.0f} | {:.2f} | {:.2f} | {:.1f}x |\n", a, b, rt_ns, shared_ns, priv_ns,
               shared_ns / priv_ns);
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
