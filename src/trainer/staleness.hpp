// --telemetry's staleness probe (hogwild/telemetry.hpp says what it measures). Each
// worker's started and finished counters are its progress record's `begun` and
// `samples` (every mode that writes the shared weights raises them around each
// update anyway), so measuring adds no shared write but the worker's own
// histograms: a sampled update reads the other workers' two counters at its start
// and end. Private to the trainer.
#pragma once

#include <cstdint>
#include <span>

#include "hogwild/telemetry.hpp"
#include "trainer/progress.hpp"

namespace hogwild::detail {

// Log-linear buckets: 0..15 exactly, then four per power of two up to 2^63.
constexpr unsigned kStalenessBuckets = 16 + 4 * 60;
constexpr unsigned kLengthBuckets = 5;
unsigned staleness_bucket(std::uint64_t value) noexcept;
std::uint64_t staleness_bucket_floor(unsigned bucket) noexcept;

// A worker's histograms, in the arena: written by the worker alone (relaxed), read
// by the parent at any time.
struct alignas(128) StalenessRecord {
  std::uint64_t lag[kStalenessBuckets];
  std::uint64_t overlap[kStalenessBuckets];
  std::uint64_t count, lag_sum, overlap_sum, lag_max, overlap_max;
  std::uint64_t length_count[kLengthBuckets], length_lag_sum[kLengthBuckets];
};

class StalenessProbe {
 public:
  // all: every worker's progress record; me: this worker's; every: the mean gap
  // between sampled updates (geometric, from `seed`).
  StalenessProbe(std::span<const WorkerProgress> all, unsigned me, StalenessRecord& record,
                 unsigned every, std::uint64_t seed) noexcept;
  // Before each update: true when this one is measured.
  bool due() noexcept {
    if (--skip_ > 0) return false;
    skip_ = next_gap();
    return true;
  }
  void start() noexcept;                 // where the update's reads begin
  void finish(std::uint64_t nnz) noexcept;  // after its writes
  // A measured update's figures into the record, as finish() puts them (--mode
  // simulated: its exact ones, for the sampled estimate on its schedule).
  void record(std::uint64_t lag, std::uint64_t overlap, std::uint64_t nnz) noexcept;

 private:
  std::uint32_t next_gap() noexcept;

  std::span<const WorkerProgress> all_;
  unsigned me_;
  StalenessRecord& record_;
  unsigned every_;
  std::uint64_t rng_;
  std::uint32_t skip_;
  std::uint64_t finished_at_start_ = 0;
};

// The run's figures from the workers' records (every: the sampling gap).
Staleness summarize_staleness(std::span<const StalenessRecord> records, unsigned every);

}  // namespace hogwild::detail
