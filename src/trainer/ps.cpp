#include "trainer/ps.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hogwild/communicator.hpp"
#include "hogwild/error.hpp"
#include "trainer/run.hpp"  // now_ns

namespace hogwild::detail {

namespace {

struct Layout {
  std::uint32_t replicas, servers;
};

struct RecordHeader {
  std::uint32_t tensor;
  std::uint32_t count;  // (index within the server's slice, value) pairs that follow
  float lr;
  std::uint32_t replica;
  std::uint64_t clock;
};
constexpr std::uint32_t kEndOfPush = 0xffffffffu;  // RecordHeader::tensor of a push's last record

struct Pair {
  std::uint32_t index;
  float value;
};

std::size_t align128(std::size_t n) { return (n + 127) / 128 * 128; }

// A waiting loop's k-th turn: give the core away a few times (a server and the
// replicas often share cores), then sleep in short naps.
void pause(unsigned k) {
  if (k < 64) sched_yield();
  else ::usleep(20);
}

// A measured staleness into its slot's sum and maximum (the slot's replica alone
// writes them).
void note_gap(std::atomic<std::uint64_t>& sum, std::atomic<std::uint64_t>& max, std::uint64_t gap) {
  sum.fetch_add(gap, std::memory_order_relaxed);
  if (gap > max.load(std::memory_order_relaxed)) max.store(gap, std::memory_order_relaxed);
}

}  // namespace

std::size_t PsRegion::bytes(unsigned replicas, unsigned servers) {
  return align128(sizeof(Layout)) + replicas * sizeof(PsReplicaSlot) +
         servers * sizeof(PsServerSlot) +
         std::size_t{replicas} * servers * align128(ShmRing::region_bytes(kRingBytes));
}

void PsRegion::prepare(std::span<std::byte> region, unsigned replicas, unsigned servers) {
  HOGWILD_ENFORCE_LE(bytes(replicas, servers), region.size());
  new (region.data()) Layout{replicas, servers};
  std::byte* at = region.data() + align128(sizeof(Layout));
  for (unsigned r = 0; r < replicas; ++r, at += sizeof(PsReplicaSlot)) new (at) PsReplicaSlot;
  for (unsigned s = 0; s < servers; ++s, at += sizeof(PsServerSlot)) new (at) PsServerSlot;
  const std::size_t ring = align128(ShmRing::region_bytes(kRingBytes));
  for (unsigned k = 0; k < replicas * servers; ++k, at += ring)
    ShmRing::prepare({at, ring}, kRingBytes);
}

PsRegion::PsRegion(std::span<std::byte> region) {
  const auto* layout = reinterpret_cast<const Layout*>(region.data());
  replicas_ = layout->replicas;
  servers_ = layout->servers;
  HOGWILD_ENFORCE_LE(bytes(replicas_, servers_), region.size());
  std::byte* at = region.data() + align128(sizeof(Layout));
  replica_ = reinterpret_cast<PsReplicaSlot*>(at);
  server_ = reinterpret_cast<PsServerSlot*>(at + replicas_ * sizeof(PsReplicaSlot));
  rings_ = at + replicas_ * sizeof(PsReplicaSlot) + servers_ * sizeof(PsServerSlot);
}

ShmRing PsRegion::ring(unsigned replica, unsigned server) const {
  const std::size_t ring = align128(ShmRing::region_bytes(kRingBytes));
  return ShmRing({rings_ + (std::size_t{replica} * servers_ + server) * ring, ring});
}

std::uint64_t PsRegion::ahead(std::uint64_t clock) const noexcept {
  std::uint64_t slowest = clock;
  for (unsigned r = 0; r < replicas_; ++r)
    if (!replica_[r].done.load(std::memory_order_acquire))
      slowest = std::min(slowest, replica_[r].clock.load(std::memory_order_acquire));
  return clock - slowest;
}

template <class Done>
bool PsClient::wait_until(Done&& done) const {
  for (unsigned k = 0; !done(); ) {
    if (stop_ && stop_->load(std::memory_order_relaxed)) return false;
    pause(++k);
  }
  return true;
}

PsClient::PsClient(const ParamSet& shared, PsRegion region, unsigned rank, PsOptions options,
                   const std::atomic<std::int32_t>* stop)
    : shared_(shared), region_(region), rank_(rank), options_(options), stop_(stop) {
  std::vector<ParamSet::Tensor> t;
  for (const auto& s : shared.tensors()) {
    data_.emplace_back(s.size);
    grad_.emplace_back(s.size, 0.f);
    ParamSet::Tensor x{s.name, data_.back().data(), s.size};
    x.grad = grad_.back().data();
    t.push_back(std::move(x));
  }
  params_ = ParamSet(std::move(t), /*exclusive=*/true);
  region_.replica(rank_).done.store(0, std::memory_order_release);  // a respawn trains again
  fetch();
}

void PsClient::fetch(bool all) {
  auto& me = region_.replica(rank_);
  const std::uint64_t mine = me.clock.load(std::memory_order_relaxed);
  {  // every server has applied this replica's pushes so far
    const std::int64_t t0 = now_ns();
    for (unsigned s = 0; s < region_.servers(); ++s)
      if (!wait_until([&] { return me.applied[s].load(std::memory_order_acquire) >= mine; }))
        return;
    me.wait_ns.fetch_add(static_cast<std::uint64_t>(now_ns() - t0), std::memory_order_relaxed);
  }
  // THE INTENDED RACE: a pull reads what the servers write meanwhile.
  for (std::size_t i = 0; i < shared_.count(); ++i) {
    if (i == 0 && options_.sparse && !all) {
      for (std::uint32_t k : pushed_keys_) data_[0][k] = relaxed_load(shared_.data(0) + k);
      continue;
    }
    for (std::size_t k = 0; k < shared_.size(i); ++k)
      data_[i][k] = relaxed_load(shared_.data(i) + k);
  }
  pushed_keys_.clear();
  me.pulls.fetch_add(1, std::memory_order_relaxed);
  note_gap(me.gap_sum, me.gap_max, region_.ahead(mine));
}

bool PsClient::after_batch(const Batch& b, float lr) {
  pending_ = true;
  ++batches_;
  if (options_.sparse)
    for (std::size_t i = 0; i < b.size; ++i) {
      const RowView x = b.row(i);
      touched_.insert(touched_.end(), x.index, x.index + x.nnz);
    }
  if (batches_ % options_.push_every == 0 && !push(lr)) return false;
  if (batches_ % options_.fetch_every == 0) fetch(false);
  return true;
}

bool PsClient::flush(float lr) { return !pending_ || push(lr); }

void PsClient::finish(float lr) {
  flush(lr);
  region_.replica(rank_).done.store(1, std::memory_order_release);
}

bool PsClient::push(float lr) {
  auto& me = region_.replica(rank_);
  const std::uint64_t clock = me.clock.load(std::memory_order_relaxed);
  const std::int64_t t0 = now_ns();
  if (options_.staleness >= 0 &&  // stale-synchronous: wait for the slowest
      !wait_until([&] {
        return region_.ahead(clock) <= static_cast<std::uint64_t>(options_.staleness);
      }))
    return false;
  // The staleness this push starts with (at most the bound, where there is one).
  note_gap(me.push_gap_sum, me.push_gap_max, region_.ahead(clock));
  const unsigned servers = region_.servers();
  std::uint64_t bytes = 0;
  if (options_.sparse) {
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  }
  std::vector<Pair> pairs;
  for (unsigned s = 0; s < servers; ++s) {
    ShmRing ring = region_.ring(rank_, s);
    const std::size_t per = (ring.max_payload() - sizeof(RecordHeader)) / sizeof(Pair);
    for (std::size_t t = 0; t < params_.count(); ++t) {
      const Slice slice = slice_of(params_.size(t), s, servers);
      float* g = grad_[t].data();
      pairs.clear();
      if (t == 0 && options_.sparse) {  // the touched features, sorted and unique
        for (auto it = std::lower_bound(touched_.begin(), touched_.end(), slice.begin);
             it != touched_.end() && *it < slice.end; ++it)
          if (g[*it] != 0) {
            pairs.push_back({static_cast<std::uint32_t>(*it - slice.begin), g[*it]});
            g[*it] = 0;
          }
      } else {
        for (std::size_t k = slice.begin; k < slice.end; ++k)
          if (g[k] != 0) {
            pairs.push_back({static_cast<std::uint32_t>(k - slice.begin), g[k]});
            g[k] = 0;
          }
      }
      for (std::size_t at = 0; at < pairs.size(); at += per) {
        const std::size_t n = std::min(per, pairs.size() - at);
        const RecordHeader h{static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(n), lr,
                             rank_, clock};
        const std::span<const std::byte> head(reinterpret_cast<const std::byte*>(&h), sizeof h);
        const std::span<const std::byte> body(reinterpret_cast<const std::byte*>(pairs.data() + at),
                                              n * sizeof(Pair));
        if (!wait_until([&] { return ring.try_push(0, head, body); }))  // the server drains it
          return false;
        bytes += sizeof h + n * sizeof(Pair);
      }
    }
    // The push's end for this server (also when it had nothing for it).
    const RecordHeader end{kEndOfPush, 0, lr, rank_, clock};
    if (!wait_until(
            [&] { return ring.try_push(0, {reinterpret_cast<const std::byte*>(&end), sizeof end}); }))
      return false;
    bytes += sizeof end;
  }
  // (Every pushed coordinate was zeroed as it went: the buffers are clean.)
  if (options_.sparse) {
    pushed_keys_.insert(pushed_keys_.end(), touched_.begin(), touched_.end());
    touched_.clear();
  }
  pending_ = false;
  ++pushes_;
  me.bytes.fetch_add(bytes, std::memory_order_relaxed);
  me.wait_ns.fetch_add(static_cast<std::uint64_t>(now_ns() - t0), std::memory_order_relaxed);
  me.clock.store(clock + 1, std::memory_order_release);
  return true;
}

void serve(const ParamSet& shared, PsRegion region, unsigned server, Optimizer optimizer,
           const std::atomic<std::int32_t>* stop) {
  const unsigned replicas = region.replicas(), servers = region.servers();
  std::vector<ShmRing> rings;
  for (unsigned r = 0; r < replicas; ++r) rings.push_back(region.ring(r, server));
  auto& me = region.server(server);
  for (unsigned idle = 0;;) {
    bool any = false;
    for (auto& ring : rings) {
      ShmRing::Record rec;
      for (int n = 0; n < 64 && ring.try_peek(rec); ++n) {  // a few, then the next replica's
        RecordHeader h;
        std::memcpy(&h, rec.payload.data(), sizeof h);
        if (h.tensor == kEndOfPush) {  // the replica's push h.clock is applied here
          HOGWILD_ENFORCE_LT(h.replica, replicas);
          region.replica(h.replica).applied[server].store(h.clock + 1, std::memory_order_release);
          ring.pop();
          any = true;
          continue;
        }
        HOGWILD_ENFORCE_LT(h.tensor, shared.count());
        HOGWILD_ENFORCE_EQ(rec.payload.size(), sizeof h + h.count * sizeof(Pair));
        const Slice slice = slice_of(shared.size(h.tensor), server, servers);
        float* w = shared.data(h.tensor) + slice.begin;
        float* G = shared[h.tensor].state ? shared[h.tensor].state + slice.begin : nullptr;
        const std::byte* at = rec.payload.data() + sizeof h;
        for (std::uint32_t k = 0; k < h.count; ++k, at += sizeof(Pair)) {
          Pair p;
          std::memcpy(&p, at, sizeof p);
          HOGWILD_ENFORCE_LT(p.index, slice.size());
          // This server is the coordinate's one writer; replicas' pulls read it
          // meanwhile (relaxed: THE INTENDED RACE).
          if (optimizer == Optimizer::sgd) {  // the replica's step, -lr g
            relaxed_store(w + p.index, relaxed_load(w + p.index) + p.value);
          } else {  // AdaGrad's: the gradient g
            const float g2 = relaxed_load(G + p.index) + p.value * p.value;
            relaxed_store(G + p.index, g2);
            relaxed_store(w + p.index, relaxed_load(w + p.index) -
                                           h.lr * p.value / (std::sqrt(g2) + AdaGrad::eps));
          }
        }
        me.records.fetch_add(1, std::memory_order_relaxed);
        me.keys.fetch_add(h.count, std::memory_order_relaxed);
        ring.pop();
        any = true;
      }
    }
    if (any) {
      idle = 0;
      continue;
    }
    // Nothing came: done when every replica is, and its last records are applied
    // (a replica sets done after its last push is on the ring).
    bool all_done = true;
    for (unsigned r = 0; r < replicas && all_done; ++r)
      all_done = region.replica(r).done.load(std::memory_order_acquire) != 0;
    if (all_done) {
      bool empty = true;
      for (auto& ring : rings) empty = empty && ring.used() == 0;
      if (empty) return;
    }
    if (stop && stop->load(std::memory_order_relaxed)) return;
    pause(++idle);
  }
}

}  // namespace hogwild::detail
