// All-reduce bandwidth of the Communicator backends between real forked ranks, in
// nccl-tests' columns: size, count, time, algbw (bytes / time), busbw (algbw x
// 2 (n-1) / n: the traffic of one link in a ring) and #wrong (elements of one
// checked all-reduce of integer values that differ from the exact sum). The
// machine's memcpy rate is measured in the same run, as the yardstick: a shared
// memory all-reduce moves each byte through memory a few times.
//   bench_allreduce --backends shm,gloo --ranks 2,4 --min 4K --max 256M [--json FILE]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "comm/shm.hpp"
#include "hogwild/config.hpp"
#if HOGWILD_HAVE_GLOO
#include "comm/gloo.hpp"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using hogwild::Communicator;
using hogwild::detail::ShmCommunicator;

struct Row {  // one size's result, written by rank 0 into the shared page
  std::uint64_t bytes;
  double seconds;
  std::uint64_t wrong;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Bytes copied per second by memcpy between two 64 MiB buffers (best of a few).
double memcpy_rate() {
  const std::size_t n = std::size_t{64} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  double best = 1e30;
  for (int i = 0; i < 8; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), n);
    best = std::min(best, seconds_since(t0));
    a[i] = b[n - 1 - i];  // keep the copies alive
  }
  return static_cast<double>(n) / best;
}

std::vector<std::size_t> sizes(std::size_t min, std::size_t max) {
  std::vector<std::size_t> s;
  for (std::size_t b = min; b <= max; b *= 4) s.push_back(b);
  return s;
}

std::unique_ptr<Communicator> make(const std::string& backend, std::span<std::byte> region,
                                   const std::string& dir, unsigned rank, unsigned ranks) {
  if (backend == "shm")
    return std::make_unique<ShmCommunicator>(region, rank, ranks, std::chrono::seconds(60));
#if HOGWILD_HAVE_GLOO
  if (backend == "gloo") {
    hogwild::GlooOptions o;
    o.rendezvous = "file:" + dir;
    o.run_id = "bench";
    o.timeout = std::chrono::seconds(60);
    return hogwild::make_gloo_communicator(o, rank, ranks);
  }
#endif
  (void)dir;
  throw hogwild::ConfigError("unknown or unbuilt backend " + backend);
}

// Rank body: for every size, one checked all-reduce, then `reps` timed runs of
// all-reduces for about `budget` seconds in all (at least 3 each); rank 0 writes
// the median run's time per all-reduce.
void rank_main(const std::string& backend, std::span<std::byte> region, const std::string& dir,
               unsigned rank, unsigned ranks, const std::vector<std::size_t>& all, double budget,
               int reps, Row* rows) {
  auto comm = make(backend, region, dir, rank, ranks);
  std::vector<float> v(all.back() / sizeof(float));
  // Warm up (the pages, the caches, the clocks: the first second ran 2-4x slower
  // here) with about half a second of the largest all-reduce, the count agreed.
  {
    const auto t0 = Clock::now();
    comm->all_reduce(std::span<float>(v));
    std::vector<std::byte> agreed(sizeof(double));
    const double once = seconds_since(t0);
    std::memcpy(agreed.data(), &once, sizeof once);
    comm->broadcast(agreed, 0);
    double first;
    std::memcpy(&first, agreed.data(), sizeof first);
    for (int i = 0, n = static_cast<int>(0.5 / std::max(first, 1e-6)); i < n; ++i)
      comm->all_reduce(std::span<float>(v));
  }
  for (std::size_t k = 0; k < all.size(); ++k) {
    const std::size_t n = all[k] / sizeof(float);
    const std::span<float> data(v.data(), n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i % 97) + rank);
    comm->all_reduce(data);
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += v[i] != static_cast<float>(ranks * (i % 97) + ranks * (ranks - 1) / 2);
    std::fill(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), 0.f);
    comm->all_reduce(data);  // warm
    // Iterations: agreed from rank 0's estimate of one, so every rank does as many.
    double once = 0;
    {
      comm->barrier();
      const auto t0 = Clock::now();
      comm->all_reduce(data);
      once = seconds_since(t0);
    }
    std::vector<std::byte> agreed(sizeof(double));
    std::memcpy(agreed.data(), &once, sizeof once);
    comm->broadcast(agreed, 0);
    std::memcpy(&once, agreed.data(), sizeof once);
    const int iters = std::max(3, static_cast<int>(budget / reps / std::max(once, 1e-7)));
    std::vector<double> times;
    for (int rep = 0; rep < reps; ++rep) {  // the median of `reps` timed runs
      comm->barrier();
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) comm->all_reduce(data);
      comm->barrier();
      times.push_back(seconds_since(t0) / iters);
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    std::vector<double> count{static_cast<double>(wrong)};
    comm->all_reduce(std::span<double>(count));  // every rank's wrong elements
    if (rank == 0) rows[k] = {all[k], t, static_cast<std::uint64_t>(count[0])};
  }
}

std::size_t parse_bytes(const std::string& s) {
  std::size_t end = 0;
  const double v = std::stod(s, &end);
  const std::string unit = s.substr(end);
  const double m = unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : 1.0;
  return static_cast<std::size_t>(v * m);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("All-reduce bandwidth of the Communicator backends (nccl-tests' columns)");
  std::vector<std::string> backends{"shm"};
#if HOGWILD_HAVE_GLOO
  backends.push_back("gloo");
#endif
  std::vector<unsigned> ranks_list{2, 4};
  std::string min_s = "4K", max_s = "256M", json;
  double budget = 0.3;
  int reps = 5;
  app.add_option("--backends", backends, "shm, gloo")->delimiter(',');
  app.add_option("--ranks", ranks_list, "rank counts")->delimiter(',');
  app.add_option("--min", min_s, "smallest size (bytes, K, M)");
  app.add_option("--max", max_s, "largest size");
  app.add_option("--budget", budget, "seconds of timed all-reduces per size and rank count");
  app.add_option("--reps", reps, "timed runs per size (the median is reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--json", json, "also write the rows as JSON lines to FILE");
  CLI11_PARSE(app, argc, argv);
  const auto all = sizes(parse_bytes(min_s), parse_bytes(max_s));
  const double copy = memcpy_rate();
  fmt::print("# memcpy: {:.2f} GB/s (64 MiB, best of 8)\n", copy / 1e9);
  std::ofstream out;
  if (!json.empty()) {
    out.open(json);
    out << fmt::format("{{\"memcpy_GBps\": {:.4f}}}\n", copy / 1e9);
  }
  for (const auto& backend : backends)
    for (unsigned ranks : ranks_list) {
      const std::size_t region_bytes = ShmCommunicator::region_bytes(ranks);
      const std::size_t page = all.size() * sizeof(Row);
      auto* map = static_cast<std::byte*>(mmap(nullptr, region_bytes + page,
                                               PROT_READ | PROT_WRITE,
                                               MAP_SHARED | MAP_ANONYMOUS, -1, 0));
      if (map == MAP_FAILED) return 1;
      ShmCommunicator::prepare({map, region_bytes}, ranks);
      auto* rows = reinterpret_cast<Row*>(map + region_bytes);
      const auto dir = std::filesystem::temp_directory_path() /
                       fmt::format("hogwild-bench-allreduce-{}", getpid());
      std::filesystem::create_directories(dir);
      std::fflush(stdout);
      std::vector<pid_t> pids;
      for (unsigned r = 0; r < ranks; ++r) {
        const pid_t pid = fork();
        if (pid == 0) {
          int code = 0;
          try {
            rank_main(backend, {map, region_bytes}, dir.string(), r, ranks, all, budget, reps, rows);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %u: %s\n", r, e.what());
            code = 1;
          }
          std::fflush(stdout);
          _exit(code);
        }
        pids.push_back(pid);
      }
      bool ok = true;
      for (pid_t pid : pids) {
        int status = 0;
        waitpid(pid, &status, 0);
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
      }
      std::filesystem::remove_all(dir);
      if (!ok) {
        fmt::print(stderr, "{} with {} ranks failed\n", backend, ranks);
        return 1;
      }
      fmt::print("\n# {} all-reduce, {} ranks, float sum (memcpy {:.2f} GB/s)\n", backend, ranks,
                 copy / 1e9);
      fmt::print("{:>12} {:>12} {:>11} {:>8} {:>8} {:>7} {:>9}\n", "size (B)", "count",
                 "time (us)", "algbw", "busbw", "#wrong", "busbw/cp");
      for (const Row& r : std::span<Row>(rows, all.size())) {
        const double alg = static_cast<double>(r.bytes) / r.seconds / 1e9;
        const double bus = alg * 2.0 * (ranks - 1) / ranks;
        fmt::print("{:>12} {:>12} {:>11.1f} {:>8.2f} {:>8.2f} {:>7} {:>9.2f}\n", r.bytes,
                   r.bytes / sizeof(float), r.seconds * 1e6, alg, bus, r.wrong, bus / (copy / 1e9));
        if (out)
          out << fmt::format("{{\"backend\": \"{}\", \"ranks\": {}, \"bytes\": {}, \"seconds\": "
                             "{:.9f}, \"algbw_GBps\": {:.4f}, \"busbw_GBps\": {:.4f}, "
                             "\"wrong\": {}}}\n",
                             backend, ranks, r.bytes, r.seconds, alg, bus, r.wrong);
      }
      munmap(map, region_bytes + page);
    }
  return 0;
}
