#include "trainer/staleness.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>

namespace hogwild::detail {
namespace {

constexpr std::uint64_t kLengthEdges[kLengthBuckets] = {0, 50, 150, 500, 2000};

// The record's single writer raises a maximum as owner_add adds (progress.hpp).
void raise(std::uint64_t& field, std::uint64_t value) noexcept {
  std::atomic_ref<std::uint64_t> f(field);
  if (value > f.load(std::memory_order_relaxed)) f.store(value, std::memory_order_relaxed);
}

// The others' finished (samples) or started (begun) examples.
template <auto Field>
std::uint64_t others(std::span<const WorkerProgress> all, unsigned me) noexcept {
  std::uint64_t sum = 0;
  for (unsigned q = 0; q < all.size(); ++q)
    if (q != me) sum += (all[q].*Field).load(std::memory_order_relaxed);
  return sum;
}

// Quantiles of a histogram (merged from `records` by `pick`).
Quantiles quantiles(const std::uint64_t* histogram, std::uint64_t count, std::uint64_t sum,
                    std::uint64_t max) {
  Quantiles q;
  q.samples = count;
  q.max = max;
  if (count == 0) return q;
  q.mean = static_cast<double>(sum) / static_cast<double>(count);
  auto at = [&](double fraction) {
    const auto rank = static_cast<std::uint64_t>(fraction * static_cast<double>(count - 1));
    std::uint64_t seen = 0;
    for (unsigned b = 0; b < kStalenessBuckets; ++b) {
      seen += histogram[b];
      if (seen > rank) return std::min(staleness_bucket_floor(b), max);
    }
    return max;
  };
  q.p50 = at(0.5);
  q.p90 = at(0.9);
  q.p99 = at(0.99);
  return q;
}

}  // namespace

unsigned staleness_bucket(std::uint64_t value) noexcept {
  if (value < 16) return static_cast<unsigned>(value);
  const unsigned e = static_cast<unsigned>(std::bit_width(value)) - 1;  // >= 4
  const unsigned sub = static_cast<unsigned>(value >> (e - 2)) & 3;
  return 16 + (e - 4) * 4 + sub;
}

std::uint64_t staleness_bucket_floor(unsigned bucket) noexcept {
  if (bucket < 16) return bucket;
  const unsigned e = 4 + (bucket - 16) / 4, sub = (bucket - 16) % 4;
  return std::uint64_t{4 + sub} << (e - 2);
}

StalenessProbe::StalenessProbe(std::span<const WorkerProgress> all, unsigned me,
                               StalenessRecord& record, unsigned every,
                               std::uint64_t seed) noexcept
    : all_(all), me_(me), record_(record), every_(std::max(every, 1u)),
      rng_(seed * 0x9E3779B97F4A7C15ull + me + 1) {
  skip_ = next_gap();
}

// A geometric gap of mean `every` (xorshift64*): no period for the sampling to
// alias with.
std::uint32_t StalenessProbe::next_gap() noexcept {
  if (every_ == 1) return 1;
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  const double u = static_cast<double>((rng_ * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
  const double p = 1.0 / every_;
  const double gap = std::floor(std::log1p(-u) / std::log1p(-p)) + 1;
  return static_cast<std::uint32_t>(std::clamp(gap, 1.0, 1e9));
}

void StalenessProbe::start() noexcept {
  finished_at_start_ = others<&WorkerProgress::samples>(all_, me_);
}

void StalenessProbe::finish(std::uint64_t nnz) noexcept {
  const std::uint64_t finished = others<&WorkerProgress::samples>(all_, me_);
  const std::uint64_t started = others<&WorkerProgress::begun>(all_, me_);
  // A respawned worker republishes from its last record: a count may step back.
  const std::uint64_t lag = finished > finished_at_start_ ? finished - finished_at_start_ : 0;
  const std::uint64_t overlap = started > finished_at_start_ ? started - finished_at_start_ : 0;
  record(lag, overlap, nnz);
}

void StalenessProbe::record(std::uint64_t lag, std::uint64_t overlap, std::uint64_t nnz) noexcept {
  owner_add(record_.lag[staleness_bucket(lag)], 1);
  owner_add(record_.overlap[staleness_bucket(overlap)], 1);
  owner_add(record_.count, 1);
  owner_add(record_.lag_sum, lag);
  owner_add(record_.overlap_sum, overlap);
  raise(record_.lag_max, lag);
  raise(record_.overlap_max, overlap);
  unsigned b = kLengthBuckets - 1;
  while (b > 0 && nnz < kLengthEdges[b]) --b;
  owner_add(record_.length_count[b], 1);
  owner_add(record_.length_lag_sum[b], lag);
}

Staleness summarize_staleness(std::span<const StalenessRecord> records, unsigned every) {
  Staleness s;
  s.every = every;
  std::uint64_t lag[kStalenessBuckets] = {}, overlap[kStalenessBuckets] = {};
  std::uint64_t count = 0, lag_sum = 0, overlap_sum = 0, lag_max = 0, overlap_max = 0;
  std::uint64_t length_count[kLengthBuckets] = {}, length_sum[kLengthBuckets] = {};
  for (const auto& r : records) {
    std::uint64_t l[kStalenessBuckets], o[kStalenessBuckets];
    for (unsigned b = 0; b < kStalenessBuckets; ++b) {
      l[b] = relaxed_read(r.lag[b]);
      o[b] = relaxed_read(r.overlap[b]);
      lag[b] += l[b];
      overlap[b] += o[b];
    }
    const std::uint64_t n = relaxed_read(r.count), ls = relaxed_read(r.lag_sum);
    const std::uint64_t os = relaxed_read(r.overlap_sum);
    const std::uint64_t lm = relaxed_read(r.lag_max), om = relaxed_read(r.overlap_max);
    s.worker_lag.push_back(quantiles(l, n, ls, lm));
    s.worker_overlap.push_back(quantiles(o, n, os, om));
    count += n, lag_sum += ls, overlap_sum += os;
    lag_max = std::max(lag_max, lm);
    overlap_max = std::max(overlap_max, om);
    for (unsigned b = 0; b < kLengthBuckets; ++b) {
      length_count[b] += relaxed_read(r.length_count[b]);
      length_sum[b] += relaxed_read(r.length_lag_sum[b]);
    }
  }
  s.lag = quantiles(lag, count, lag_sum, lag_max);
  for (unsigned b = 0; b < kStalenessBuckets; ++b)
    if (lag[b]) s.lag_histogram.emplace_back(staleness_bucket_floor(b), lag[b]);
  s.overlap = quantiles(overlap, count, overlap_sum, overlap_max);
  for (unsigned b = 0; b < kLengthBuckets; ++b)
    s.by_length.push_back({kLengthEdges[b], b + 1 < kLengthBuckets ? kLengthEdges[b + 1] : 0,
                           length_count[b],
                           length_count[b] ? static_cast<double>(length_sum[b]) /
                                                 static_cast<double>(length_count[b])
                                           : 0.0});
  return s;
}

}  // namespace hogwild::detail
