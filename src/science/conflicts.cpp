#include "science/conflicts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

#include "data/degrees.hpp"
#include "hogwild/update_policy.hpp"
#include "memory/single_writer.hpp"

namespace hogwild::detail {
namespace {

ConflictSlot* slots_of(std::byte* block, unsigned worker) {
  return reinterpret_cast<ConflictSlot*>(block + sizeof(ConflictBlock)) + worker * kMaxSampled;
}
const ConflictSlot* slots_of(const std::byte* block, unsigned worker) {
  return reinterpret_cast<const ConflictSlot*>(block + sizeof(ConflictBlock)) +
         worker * kMaxSampled;
}

// This process's lookup from a sampled coordinate's address to its slot, and the
// bits g_sample points at.
struct Lookup {
  std::vector<std::uint64_t> bits;
  std::vector<std::pair<const float*, ConflictSlot*>> slots;  // sorted by address
};
Lookup g_lookup;

// The coordinates of the weights this process samples: a bit per float of
// [begin, end) marks a sampled one. Set in a worker before its first step, once.
struct Sample {
  const float* begin = nullptr;
  const float* end = nullptr;
  const std::uint64_t* bits = nullptr;
  bool atomic = false;  // atomic mode: every add is a read-modify-write that cannot lose
};
Sample g_sample;

bool sampled(const float* p) noexcept {
  if (p < g_sample.begin || p >= g_sample.end) return false;
  const auto i = static_cast<std::size_t>(p - g_sample.begin);
  return (g_sample.bits[i >> 6] >> (i & 63)) & 1;
}

}  // namespace

std::size_t conflict_block_bytes(unsigned workers) {
  return sizeof(ConflictBlock) + std::size_t{workers} * kMaxSampled * sizeof(ConflictSlot);
}

void choose_conflict_sample(std::byte* block, const std::vector<TensorSpec>& specs,
                            const Dataset& train, bool feature_indexed, std::size_t k,
                            std::uint64_t seed) {
  auto* b = reinterpret_cast<ConflictBlock*>(block);
  std::vector<SampledCoordinate> chosen;
  auto taken = [&](std::uint32_t t, std::uint64_t i) {
    return std::any_of(chosen.begin(), chosen.end(),
                       [&](const SampledCoordinate& c) { return c.tensor == t && c.index == i; });
  };
  for (std::uint32_t t = 0; t < specs.size(); ++t)  // the biases: every update writes one
    if (specs[t].name == "b" || specs[t].name == "bias")
      for (std::uint64_t i = 0; i < std::min<std::size_t>(specs[t].size, 16); ++i)
        chosen.push_back({t, 0, i, train.rows(), 0});
  std::vector<FeatureDegree> degrees;
  // Degrees are known for sparse rows only (feature_degrees' list is empty for others).
  const bool known = feature_indexed && !specs.empty() && train.layout() == Layout::sparse;
  if (known) {
    degrees = feature_degrees(train, specs[0].size);
    for (std::uint32_t j : most_frequent(degrees, k))
      chosen.push_back({0, 1, j, degree_of(degrees, j), 0});
  }
  if (!specs.empty() && specs[0].size > 0) {
    std::mt19937_64 rng(seed ^ 0xC0FF1C75ull);
    std::uniform_int_distribution<std::uint64_t> pick(0, specs[0].size - 1);
    for (std::size_t n = 0, tries = 0; n < k && tries < 100 * k && chosen.size() < kMaxSampled;
         ++tries) {
      const std::uint64_t i = pick(rng);
      const std::uint32_t rows = known ? degree_of(degrees, i) : 0;
      if (taken(0, i) || (known && rows == 0)) continue;  // a feature no row has
      chosen.push_back({0, 2, i, rows, 0});
      ++n;
    }
  }
  chosen.resize(std::min(chosen.size(), kMaxSampled));
  b->count = static_cast<std::uint32_t>(chosen.size());
  std::copy(chosen.begin(), chosen.end(), b->coordinates);
}

void record_conflict_start(std::byte* block, const ParamSet& params) {
  auto* b = reinterpret_cast<ConflictBlock*>(block);
  for (std::uint32_t c = 0; c < b->count; ++c)
    b->coordinates[c].initial = params.data(b->coordinates[c].tensor)[b->coordinates[c].index];
}

void start_conflict_sampling(std::byte* block, unsigned worker, const ParamSet& params,
                             bool atomic) {
  const auto* b = reinterpret_cast<const ConflictBlock*>(block);
  const float* begin = params.data(0);
  const float* end = params.data(0) + params.size(0);
  for (const auto& t : params.tensors()) {
    begin = std::min<const float*>(begin, t.data);
    end = std::max<const float*>(end, t.data + t.size);
  }
  const auto floats = static_cast<std::size_t>(end - begin);
  g_lookup.bits.assign((floats + 63) / 64, 0);
  g_lookup.slots.clear();
  ConflictSlot* slots = slots_of(block, worker);
  for (std::uint32_t c = 0; c < b->count; ++c) {
    const float* p = params.data(b->coordinates[c].tensor) + b->coordinates[c].index;
    const auto i = static_cast<std::size_t>(p - begin);
    g_lookup.bits[i >> 6] |= std::uint64_t{1} << (i & 63);
    g_lookup.slots.emplace_back(p, slots + c);
  }
  std::sort(g_lookup.slots.begin(), g_lookup.slots.end());
  g_sample = {begin, end, g_lookup.bits.data(), atomic};
}

// Every write of a measured run (MeasuredUpdate): hogwild's (or under a lock,
// serial's) relaxed load and store, or atomic mode's fetch_add; for a sampled
// coordinate, the load and store with a compare-and-swap between them, so that a
// write landing inside is seen; hogwild then stores what it computed anyway (the
// other write is lost, as it would be), atomic retries.
void measured_add(float* p, float d) noexcept {
  if (!sampled(p)) {
    if (g_sample.atomic)
      std::atomic_ref<float>(*p).fetch_add(d, std::memory_order_relaxed);
    else
      relaxed_store(p, relaxed_load(p) + d);  // hogwild's own write (update_policy.hpp)
    return;
  }
  std::atomic_ref<float> w(*p);
  const float read = w.load(std::memory_order_relaxed);
  float seen = read;
  std::uint64_t conflicts = 0;
  if (g_sample.atomic) {
    while (!w.compare_exchange_strong(seen, seen + d, std::memory_order_relaxed)) ++conflicts;
  } else if (!w.compare_exchange_strong(seen, read + d, std::memory_order_relaxed)) {
    ++conflicts;
    w.store(read + d, std::memory_order_relaxed);
  }
  const auto it = std::lower_bound(g_lookup.slots.begin(), g_lookup.slots.end(),
                                   std::pair<const float*, ConflictSlot*>{p, nullptr});
  ConflictSlot& slot = *it->second;
  owner_add(slot.intended, static_cast<double>(d));
  owner_add(slot.writes, 1);
  if (conflicts) owner_add(slot.conflicts, conflicts);
}

Conflicts summarize_conflicts(const std::byte* block, unsigned workers, const ParamSet& params) {
  const auto* b = reinterpret_cast<const ConflictBlock*>(block);
  Conflicts out;
  out.measured = true;
  std::size_t written = 0;
  for (std::uint32_t c = 0; c < b->count; ++c) {
    const SampledCoordinate& s = b->coordinates[c];
    CoordinateConflicts r;
    r.what = fmt::format("{}[{}]", params[s.tensor].name, s.index);
    r.why = s.why == 0   ? "bias"
            : s.why == 1 ? fmt::format("top-k (in {} rows)", s.degree)
                         : "random";
    double magnitude = 0;
    for (unsigned w = 0; w < workers; ++w) {
      const ConflictSlot& slot = slots_of(block, w)[c];
      const double intended = relaxed_read(slot.intended);
      r.intended += intended;
      magnitude += std::abs(intended);
      r.writes += relaxed_read(slot.writes);
      r.conflicts += relaxed_read(slot.conflicts);
    }
    r.applied = static_cast<double>(params.data(s.tensor)[s.index]) - static_cast<double>(s.initial);
    r.lost_mass = magnitude > 0 ? std::abs(r.applied - r.intended) / magnitude : 0;
    out.writes += r.writes;
    out.conflicts += r.conflicts;
    if (r.writes > 0) {
      ++written;
      out.lost_mass_mean += r.lost_mass;
      out.lost_mass_max = std::max(out.lost_mass_max, r.lost_mass);
    }
    out.coordinates.push_back(std::move(r));
  }
  if (written) out.lost_mass_mean /= static_cast<double>(written);
  out.conflict_rate =
      out.writes ? static_cast<double>(out.conflicts) / static_cast<double>(out.writes) : 0;
  return out;
}

}  // namespace hogwild::detail
