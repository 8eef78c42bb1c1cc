// What --telemetry measures in a run (docs/EXPERIMENTS.md, "How stale were the
// reads?"): the staleness of the workers' updates. For a sampled update of worker
// p, with S_q and F_q the examples worker q had finished when p's update started
// and when it ended, and A_q those q had started by the end:
//   lag     = sum_{q != p} (F_q - S_q)   updates by others that finished while it ran
//                                        (Niu et al.'s tau, "after write" order)
//   overlap = sum_{q != p} (A_q - S_q)   updates by others that ran at the same time
//                                        (Mania et al.'s tau)
// both in examples (a mini-batch of B rows counts B). The start is taken where the
// update's reads begin (inside the lock in lock mode), so lock mode's lag is 0.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hogwild {

struct Quantiles {
  std::uint64_t samples = 0;  // sampled updates
  double mean = 0;
  // From a log-linear histogram: exact up to 15, then within 1/4 of a power of two
  // (the lower end of the value's bucket); max is exact.
  std::uint64_t p50 = 0, p90 = 0, p99 = 0, max = 0;
};

// The mean lag of the sampled updates that wrote between min_nnz and max_nnz
// (exclusive; 0 = no upper end) coordinates' worth of non-zeros.
struct LagByLength {
  std::uint64_t min_nnz = 0, max_nnz = 0;
  std::uint64_t samples = 0;
  double mean_lag = 0;
};

struct Staleness {
  std::uint64_t every = 0;  // 1 in `every` updates sampled (on average); 0 = not measured
  Quantiles lag, overlap;
  std::vector<Quantiles> worker_lag, worker_overlap;
  std::vector<LagByLength> by_length;  // <50, 50-150, 150-500, 500-2000, >=2000 non-zeros
  // The run's lag histogram: (the least lag of a bucket, the updates in it), for
  // the buckets that hold any, in order.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> lag_histogram;
};

// --conflicts: on a sample of the weights' coordinates (the bias, the top-k
// features by degree, k random ones), each write's read-modify-write is a
// compare-and-swap, so a write of another worker that lands inside it is seen (a
// conflict: under hogwild the other's write is then lost, as it would be; under
// atomic the add retries and nothing is lost), and each worker keeps a private
// sum of the changes it meant to make. The lost-update mass of a coordinate is
//   |x(T) - x(0) - sum_p intended_p| / sum_p |intended_p|
// exact for additive updates (SGD, and L2 as an additive term); float rounding
// alone (serial) leaves about 1e-6.
struct CoordinateConflicts {
  std::string what;  // "b[0]", "w[963100]"
  std::string why;   // "bias", "top-k" (with the feature's degree), "random"
  std::uint64_t writes = 0, conflicts = 0;
  double intended = 0;   // sum over the workers of the changes they meant
  double applied = 0;    // x(T) - x(0)
  double lost_mass = 0;  // |applied - intended| / sum_p |intended_p| (0 when never written)
};

struct Conflicts {
  bool measured = false;
  std::vector<CoordinateConflicts> coordinates;
  std::uint64_t writes = 0, conflicts = 0;
  double conflict_rate = 0;  // conflicts / writes
  double lost_mass_mean = 0, lost_mass_max = 0;  // over the coordinates written
};

}  // namespace hogwild
