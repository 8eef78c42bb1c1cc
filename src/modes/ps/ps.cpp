#include "modes/ps/ps.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "comm/communicator.hpp"
#include "hogwild/error.hpp"
#include "trainer/run.hpp"  // now_ns

namespace hogwild::detail {

namespace {

struct Layout {
  std::uint32_t replicas, servers, hashed;
};

struct RecordHeader {
  std::uint32_t tensor;  // | kDense: a bucket
  std::uint32_t count;   // (index within the server's slice, value) pairs that follow,
                         // or a bucket's values
  float lr;
  std::uint32_t replica;
  std::uint64_t clock;
  std::uint32_t first = 0;  // a bucket's first index within the slice
  std::uint32_t reserved = 0;
};
constexpr std::uint32_t kEndOfPush = 0xffffffffu;  // RecordHeader::tensor of a push's last record
constexpr std::uint32_t kDense = 0x40000000u;      // RecordHeader::tensor of a bucket

struct Pair {
  std::uint32_t index;
  float value;
};

// The bytes of a record's body.
std::size_t body_bytes(const RecordHeader& h) {
  return std::size_t{h.count} * (h.tensor & kDense ? sizeof(float) : sizeof(Pair));
}

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

void PsRegion::prepare(std::span<std::byte> region, unsigned replicas, unsigned servers,
                       unsigned nodes, bool hashed) {
  HOGWILD_ENFORCE_LE(bytes(replicas, servers), region.size());
  new (region.data()) Layout{replicas, servers, hashed ? 1u : 0u};
  std::byte* at = region.data() + align128(sizeof(Layout));
  for (unsigned r = 0; r < replicas; ++r, at += sizeof(PsReplicaSlot)) new (at) PsReplicaSlot;
  for (unsigned s = 0; s < servers; ++s, at += sizeof(PsServerSlot))
    (new (at) PsServerSlot)->remote_slowest.store(nodes > 1 ? 0 : ~std::uint64_t{0});
  const std::size_t ring = align128(ShmRing::region_bytes(kRingBytes));
  for (unsigned k = 0; k < replicas * servers; ++k, at += ring)
    ShmRing::prepare({at, ring}, kRingBytes);
}

PsRegion::PsRegion(std::span<std::byte> region) {
  const auto* layout = reinterpret_cast<const Layout*>(region.data());
  replicas_ = layout->replicas;
  servers_ = layout->servers;
  hashed_ = layout->hashed != 0;
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
  for (unsigned s = 0; s < servers_; ++s)
    slowest = std::min(slowest, server_[s].remote_slowest.load(std::memory_order_acquire));
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
  touched_.resize(params_.count());
  pushed_keys_.resize(params_.count());
  scan_.assign(params_.count(), 0);
  fetch_whole_.assign(params_.count(), 0);
  region_.replica(rank_).done.store(0, std::memory_order_release);  // a respawn trains again
  region_.replica(rank_).unpushed.store(0, std::memory_order_relaxed);
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
    if (!all && !fetch_whole_[i]) {  // the keys pushed since the last fetch
      for (std::uint32_t k : pushed_keys_[i]) data_[i][k] = relaxed_load(shared_.data(i) + k);
    } else {
      for (std::size_t k = 0; k < shared_.size(i); ++k)
        data_[i][k] = relaxed_load(shared_.data(i) + k);
    }
    pushed_keys_[i].clear();
    fetch_whole_[i] = 0;
  }
  me.pulls.fetch_add(1, std::memory_order_relaxed);
  note_gap(me.gap_sum, me.gap_max, region_.ahead(mine));
}

bool PsClient::after_batch(const Batch& b, float lr) {
  pending_ = true;
  ++batches_;
  auto& unpushed = region_.replica(rank_).unpushed;
  unpushed.store(unpushed.load(std::memory_order_relaxed) + b.size, std::memory_order_relaxed);
  for (std::size_t t = 0; t < params_.count(); ++t)  // the keys the batch may have changed
    if (!scan_[t] && !(options_.model && options_.model->touched(t, b, touched_[t])))
      scan_[t] = 1;  // the model does not say: the push scans the whole tensor
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
  for (std::size_t t = 0; t < params_.count(); ++t)
    if (!scan_[t]) {
      auto& keys = touched_[t];
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    }
  // A record onto a ring, once the server has made room.
  auto send = [&](ShmRing& ring, const RecordHeader& h, std::span<const std::byte> body) {
    const std::span<const std::byte> head(reinterpret_cast<const std::byte*>(&h), sizeof h);
    if (!wait_until([&] { return ring.try_push(0, head, body); })) return false;
    bytes += sizeof h + body.size();
    return true;
  };
  std::vector<Pair> pairs;
  for (unsigned s = 0; s < servers; ++s) {
    ShmRing ring = region_.ring(rank_, s);
    const std::size_t per = (ring.max_payload() - sizeof(RecordHeader)) / sizeof(Pair);
    const std::size_t per_bucket = (ring.max_payload() - sizeof(RecordHeader)) / sizeof(float);
    for (std::size_t t = 0; t < params_.count(); ++t) {
      const Slice slice = slice_of(params_.size(t), s, servers);
      float* g = grad_[t].data();
      pairs.clear();
      if (region_.hashed()) {  // server s's keys, tensor-wide indices; no buckets
        auto add = [&](std::size_t k) {
          if (g[k] != 0 && key_hash(k) % servers == s) {
            pairs.push_back({static_cast<std::uint32_t>(k), g[k]});
            g[k] = 0;
          }
        };
        if (!scan_[t]) {
          for (std::uint32_t k : touched_[t]) add(k);
        } else {
          for (std::size_t k = 0; k < params_.size(t); ++k) add(k);
        }
      } else if (!scan_[t]) {  // the touched keys, sorted and unique
        const auto& keys = touched_[t];
        for (auto it = std::lower_bound(keys.begin(), keys.end(), slice.begin);
             it != keys.end() && *it < slice.end; ++it)
          if (g[*it] != 0) {
            pairs.push_back({static_cast<std::uint32_t>(*it - slice.begin), g[*it]});
            g[*it] = 0;
          }
      } else {  // scanned: one bucket where the non-zeros are dense enough, else pairs
        std::size_t lo = slice.end, hi = slice.begin, nonzero = 0;
        for (std::size_t k = slice.begin; k < slice.end; ++k)
          if (g[k] != 0) {
            lo = std::min(lo, k);
            hi = k + 1;
            ++nonzero;
          }
        if (nonzero > 0 && 2 * nonzero >= hi - lo) {
          for (std::size_t at = lo; at < hi; at += per_bucket) {
            const std::size_t n = std::min(per_bucket, hi - at);
            if (!send(ring, RecordHeader{static_cast<std::uint32_t>(t) | kDense,
                                         static_cast<std::uint32_t>(n), lr, rank_, clock,
                                         static_cast<std::uint32_t>(at - slice.begin)},
                      std::as_bytes(std::span<const float>(g + at, n))))
              return false;
          }
          std::fill(g + lo, g + hi, 0.f);
          continue;
        }
        for (std::size_t k = lo; k < hi; ++k)
          if (g[k] != 0) {
            pairs.push_back({static_cast<std::uint32_t>(k - slice.begin), g[k]});
            g[k] = 0;
          }
      }
      for (std::size_t at = 0; at < pairs.size(); at += per) {
        const std::size_t n = std::min(per, pairs.size() - at);
        if (!send(ring, RecordHeader{static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(n),
                                     lr, rank_, clock},
                  std::as_bytes(std::span<const Pair>(pairs.data() + at, n))))
          return false;
      }
    }
    // The push's end for this server (also when it had nothing for it).
    if (!send(ring, RecordHeader{kEndOfPush, 0, lr, rank_, clock}, {})) return false;
  }
  // (Every pushed coordinate was zeroed as it went: the buffers are clean.)
  for (std::size_t t = 0; t < params_.count(); ++t) {
    if (scan_[t]) {
      fetch_whole_[t] = 1;
    } else {
      pushed_keys_[t].insert(pushed_keys_[t].end(), touched_[t].begin(), touched_[t].end());
    }
    touched_[t].clear();
    scan_[t] = 0;
  }
  pending_ = false;
  ++pushes_;
  me.unpushed.store(0, std::memory_order_relaxed);
  me.bytes.fetch_add(bytes, std::memory_order_relaxed);
  me.wait_ns.fetch_add(static_cast<std::uint64_t>(now_ns() - t0), std::memory_order_relaxed);
  me.clock.store(clock + 1, std::memory_order_release);
  return true;
}

namespace {

// Across nodes, a round message's records: first kRoundInfo (replica: the node's
// state, count: 1 when the message moves anything, clock: the node's slowest clock),
// then forwarded pushes (as on the rings) and new values (tensor | kValues: pairs of
// index and value, the sender's part).
constexpr std::uint32_t kRoundInfo = 0xfffffffeu;
constexpr std::uint32_t kValues = 0x80000000u;
enum NodeState : std::uint32_t { kTraining = 0, kDone = 1, kStopping = 2 };

class Server {
 public:
  Server(const ParamSet& shared, PsRegion region, unsigned server, Optimizer optimizer,
         const std::atomic<std::int32_t>* stop, Communicator* across)
      : shared_(shared), region_(region), server_(server), optimizer_(optimizer), stop_(stop),
        across_(across), node_(across ? across->rank() : 0), nodes_(across ? across->size() : 1),
        me_(region.server(server)) {
    for (unsigned r = 0; r < region.replicas(); ++r) rings_.push_back(region.ring(r, server));
    changed_.resize(shared.count());
    changed_run_.assign(shared.count(), kNoRun);
    out_.resize(nodes_);
    drained_.assign(region.replicas(), 0);
    forwarded_ = drained_;
  }

  void run() {
    if (!across_) finish_predecessors_record();
    for (unsigned idle = 0;;) {
      const bool any = drain();
      if (across_) {
        bool moved = false;
        if (round(moved)) return;
        if (any || moved) idle = 0;
        else pause(++idle);
        continue;
      }
      if (any) {
        idle = 0;
        continue;
      }
      if (local_done()) return;
      if (stopping()) return;
      pause(++idle);
    }
  }

 private:
  // Contiguous key ranges: a record's indices are within the server's slice of the
  // tensor; hashed: tensor-wide (base 0), each one of this server's keys.
  Slice slice(std::size_t t) const {
    if (region_.hashed()) return {0, shared_.size(t)};
    return slice_of(shared_.size(t), server_, region_.servers());
  }
  // The node whose part of this slice holds index k (relative to the slice).
  unsigned node_of(std::size_t t, std::size_t k) const {
    if (region_.hashed()) return key_hash(k) / region_.servers() % nodes_;
    return static_cast<unsigned>(k / ((slice(t).size() + nodes_ - 1) / nodes_));
  }
  bool mine(std::size_t k) const {
    return !region_.hashed() || key_hash(k) % region_.servers() == server_;
  }
  // Node n's part of slice t, relative to the slice.
  Slice part(std::size_t t, unsigned n) const { return slice_of(slice(t).size(), n, nodes_); }
  bool stopping() const { return stop_ && stop_->load(std::memory_order_relaxed); }

  // Every replica of this node is done and its records are taken.
  bool local_done() const {
    for (unsigned r = 0; r < region_.replicas(); ++r)
      if (!region_.replica(r).done.load(std::memory_order_acquire)) return false;
    for (const auto& ring : rings_)
      if (ring.used() != 0) return false;
    return true;
  }

  // Pushed updates into this server's part of tensor t: n coordinates, the i-th at
  // index(i) within the slice with value value(i): the replica's step -lr g (SGD),
  // or AdaGrad's with the gradient g. This server is its one writer; replicas' pulls
  // read it meanwhile (relaxed: THE INTENDED RACE). They go in blocks of kUndoBlock,
  // from block `first`; on one machine each block's old values are logged first and
  // the block counted done after (PsServerSlot), so that a server replacing this one
  // after a crash applies every coordinate exactly once.
  // (Run: index(i) is index(0) + i, a bucket, whose SGD blocks are added with one
  // vector loop.)
  template <bool Run, class Index, class Value>
  void apply(std::size_t t, float lr, std::size_t n, Index index, Value value,
             std::uint32_t first = 0) {
    constexpr std::size_t kBlock = PsServerSlot::kUndoBlock;
    float* w = shared_.data(t) + slice(t).begin;
    float* G = optimizer_ == Optimizer::sgd ? nullptr : shared_[t].state + slice(t).begin;
    const bool logged = !across_;
    for (std::size_t b = first; b * kBlock < n; ++b) {
      const std::size_t lo = b * kBlock, m = std::min(kBlock, n - lo);
      if (logged) {
        for (std::size_t i = 0; i < m; ++i) {
          relaxed_store(me_.undo_w + i, relaxed_load(w + index(lo + i)));
          if (G) relaxed_store(me_.undo_G + i, relaxed_load(G + index(lo + i)));
        }
        me_.undo_block.store(static_cast<std::uint32_t>(b), std::memory_order_release);
        // The log before the writes. What it guards against is this process's death,
        // not another's reads, and x86-64 makes stores visible in program order, so
        // keeping the compiler from moving the writes up is enough (a thread fence
        // would also be, but GCC's ThreadSanitizer refuses to build one).
        std::atomic_signal_fence(std::memory_order_seq_cst);
      }
      if (Run && !G) {
        float v[kBlock];
        for (std::size_t i = 0; i < m; ++i) v[i] = value(lo + i);
        dense_axpy_shared(w + index(lo), 1.f, v, m);  // 1 v is v: an exact add
      } else {
        for (std::size_t i = lo; i < lo + m; ++i) {
          const std::size_t k = index(i);
          const float v = value(i);
          if (!G) {
            relaxed_store(w + k, relaxed_load(w + k) + v);
          } else {
            const float g2 = relaxed_load(G + k) + v * v;
            relaxed_store(G + k, g2);
            relaxed_store(w + k, relaxed_load(w + k) - lr * v / (std::sqrt(g2) + AdaGrad::eps));
          }
        }
      }
      if (logged)  // release: the writes before the count
        me_.blocks_done.store(static_cast<std::uint32_t>(b + 1), std::memory_order_release);
    }
    if (across_ && n > 0) {  // for the next round's values
      if constexpr (Run) {
        changed_run_[t].begin = std::min<std::size_t>(changed_run_[t].begin, index(0));
        changed_run_[t].end = std::max<std::size_t>(changed_run_[t].end, index(n - 1) + 1);
      } else {
        for (std::size_t i = 0; i < n; ++i)
          changed_[t].push_back(static_cast<std::uint32_t>(index(i)));
      }
    }
  }

  // A bucket's values, from a record's body (which need not be aligned).
  static float value_at(std::span<const std::byte> body, std::size_t i) {
    float v;
    std::memcpy(&v, body.data() + i * sizeof v, sizeof v);
    return v;
  }
  static Pair pair_at(std::span<const std::byte> body, std::size_t i) {
    Pair p;
    std::memcpy(&p, body.data() + i * sizeof p, sizeof p);
    return p;
  }

  // A server replacing one that died (one machine): the record it was applying, if
  // it is still the oldest on its ring, is finished from the block it died in, that
  // block first put back to its old values.
  void finish_predecessors_record() {
    const std::uint32_t r = me_.ring.load(std::memory_order_acquire);
    if (r == PsServerSlot::kNone) return;
    HOGWILD_ENFORCE_LT(r, rings_.size());
    ShmRing& ring = rings_[r];
    ShmRing::Record rec;
    if (ring.try_peek(rec) && ring.head() == me_.position.load(std::memory_order_relaxed)) {
      RecordHeader h;
      std::memcpy(&h, rec.payload.data(), sizeof h);
      const auto body = rec.payload.subspan(sizeof h);
      const std::size_t t = h.tensor & ~kDense;
      HOGWILD_ENFORCE_LT(t, shared_.count());
      HOGWILD_ENFORCE_EQ(body.size(), body_bytes(h));
      const std::uint32_t done = me_.blocks_done.load(std::memory_order_relaxed);
      const std::size_t lo = std::size_t{done} * PsServerSlot::kUndoBlock;
      if (lo < h.count && me_.undo_block.load(std::memory_order_relaxed) == done) {
        const std::size_t m = std::min<std::size_t>(PsServerSlot::kUndoBlock, h.count - lo);
        float* w = shared_.data(t) + slice(t).begin;
        float* G = optimizer_ == Optimizer::sgd ? nullptr : shared_[t].state + slice(t).begin;
        for (std::size_t i = 0; i < m; ++i) {
          const std::size_t k = h.tensor & kDense ? h.first + lo + i : pair_at(body, lo + i).index;
          HOGWILD_ENFORCE_LT(k, slice(t).size());
          HOGWILD_ENFORCE(mine(k), "a coordinate of another server");
          relaxed_store(w + k, relaxed_load(me_.undo_w + i));
          if (G) relaxed_store(G + k, relaxed_load(me_.undo_G + i));
        }
      }
      take(h, body, false, done);
      ring.pop();
      me_.recovered.fetch_add(1, std::memory_order_relaxed);
    }
    me_.ring.store(PsServerSlot::kNone, std::memory_order_release);
  }

  // A push record: the coordinates in this node's part are applied (from block
  // `first`, on one machine), the others (from this node's replicas only) kept for
  // their owners' messages.
  void take(const RecordHeader& h, std::span<const std::byte> body, bool forwarded,
            std::uint32_t first = 0) {
    const std::size_t t = h.tensor & ~kDense;
    HOGWILD_ENFORCE_LT(t, shared_.count());
    HOGWILD_ENFORCE_EQ(body.size(), body_bytes(h));
    const std::size_t size = slice(t).size();
    if (h.tensor & kDense) {  // a bucket: each node's part of [first, first + count)
      HOGWILD_ENFORCE(!region_.hashed(), "a bucket under hashed key ranges");
      HOGWILD_ENFORCE_LE(std::size_t{h.first} + h.count, size);
      for (unsigned n = 0; n < nodes_; ++n) {
        const Slice p = part(t, n);
        const std::size_t lo = std::max<std::size_t>(p.begin, h.first);
        const std::size_t hi = std::min<std::size_t>(p.end, std::size_t{h.first} + h.count);
        if (lo >= hi) continue;
        const auto values = body.subspan((lo - h.first) * sizeof(float), (hi - lo) * sizeof(float));
        if (n == node_) {
          apply<true>(t, h.lr, hi - lo, [lo](std::size_t i) { return lo + i; },
                [values](std::size_t i) { return value_at(values, i); }, first);
        } else {
          HOGWILD_ENFORCE(!forwarded, "a forwarded record holds coordinates of another part");
          RecordHeader f = h;
          f.first = static_cast<std::uint32_t>(lo);
          f.count = static_cast<std::uint32_t>(hi - lo);
          append(out_[n], f, values);
        }
      }
    } else {
      for (auto& o : others_) o.clear();
      others_.resize(nodes_);
      for (std::uint32_t k = 0; k < h.count; ++k) {
        const Pair p = pair_at(body, k);
        HOGWILD_ENFORCE_LT(p.index, size);
        HOGWILD_ENFORCE(mine(p.index), "a coordinate of another server");
        const unsigned n = node_of(t, p.index);
        HOGWILD_ENFORCE(n == node_ || !forwarded,
                        "a forwarded record holds coordinates of another part");
        others_[n].push_back(p);
      }
      const auto& own = others_[node_];
      apply<false>(t, h.lr, own.size(), [&own](std::size_t i) { return own[i].index; },
            [&own](std::size_t i) { return own[i].value; }, first);
      for (unsigned n = 0; n < nodes_; ++n)
        if (n != node_ && !others_[n].empty()) {
          RecordHeader f = h;
          f.count = static_cast<std::uint32_t>(others_[n].size());
          append(out_[n], f, std::as_bytes(std::span<const Pair>(others_[n])));
        }
    }
    me_.records.fetch_add(1, std::memory_order_relaxed);
    me_.keys.fetch_add(h.count, std::memory_order_relaxed);
  }

  static void append(std::vector<std::byte>& to, const RecordHeader& h,
                     std::span<const std::byte> body) {
    const auto* head = reinterpret_cast<const std::byte*>(&h);
    to.insert(to.end(), head, head + sizeof h);
    to.insert(to.end(), body.begin(), body.end());
  }

  // A few records of each ring in turn; true when any came.
  bool drain() {
    bool any = false;
    for (std::uint32_t r = 0; r < rings_.size(); ++r) {
      ShmRing& ring = rings_[r];
      ShmRing::Record rec;
      for (int n = 0; n < 64 && ring.try_peek(rec); ++n) {
        RecordHeader h;
        std::memcpy(&h, rec.payload.data(), sizeof h);
        if (h.tensor == kEndOfPush) {  // the replica's push h.clock is applied here
          HOGWILD_ENFORCE_LT(h.replica, region_.replicas());
          if (across_)  // and at the other parts' owners, with the next two rounds
            drained_[h.replica] = h.clock + 1;
          else
            region_.replica(h.replica).applied[server_].store(h.clock + 1,
                                                              std::memory_order_release);
        } else if (across_) {
          take(h, rec.payload.subspan(sizeof h), false);
        } else {  // one machine: the record named for a replacement (PsServerSlot)
          me_.undo_block.store(PsServerSlot::kNone, std::memory_order_relaxed);
          me_.blocks_done.store(0, std::memory_order_relaxed);
          me_.position.store(ring.head(), std::memory_order_relaxed);
          me_.ring.store(r, std::memory_order_release);
          take(h, rec.payload.subspan(sizeof h), false);
        }
        ring.pop();
        if (!across_) me_.ring.store(PsServerSlot::kNone, std::memory_order_release);
        any = true;
      }
    }
    return any;
  }

  // The slowest clock of this node's replicas still training (UINT64_MAX: none).
  std::uint64_t slowest() const {
    std::uint64_t s = ~std::uint64_t{0};
    for (unsigned r = 0; r < region_.replicas(); ++r)
      if (!region_.replica(r).done.load(std::memory_order_acquire))
        s = std::min(s, region_.replica(r).clock.load(std::memory_order_acquire));
    return s;
  }

  // One round with the other nodes' servers of this slice; true when the group ends.
  bool round(bool& moved) {
    std::vector<std::byte> values;  // the coordinates of this part that changed
    for (std::size_t t = 0; t < changed_.size(); ++t) {
      const float* w = shared_.data(t) + slice(t).begin;
      Slice& run = changed_run_[t];
      if (run.begin < run.end) {  // buckets' coordinates: one run of values
        append(values, RecordHeader{static_cast<std::uint32_t>(t) | kValues | kDense,
                                    static_cast<std::uint32_t>(run.end - run.begin), 0, 0, 0,
                                    static_cast<std::uint32_t>(run.begin)},
               {});
        for (std::size_t k = run.begin; k < run.end; ++k) {
          const float v = relaxed_load(w + k);
          const auto* at = reinterpret_cast<const std::byte*>(&v);
          values.insert(values.end(), at, at + sizeof v);
        }
      }
      auto& keys = changed_[t];
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      std::vector<Pair> pairs;
      for (std::uint32_t k : keys)
        if (k < run.begin || k >= run.end) pairs.push_back({k, relaxed_load(w + k)});
      if (!pairs.empty())
        append(values, RecordHeader{static_cast<std::uint32_t>(t) | kValues,
                                    static_cast<std::uint32_t>(pairs.size()), 0, 0, 0},
               std::as_bytes(std::span<const Pair>(pairs)));
      keys.clear();
      run = kNoRun;
    }
    const std::vector<std::uint64_t> forwarding = drained_;  // their records go now
    const NodeState state = stopping() ? kStopping : local_done() ? kDone : kTraining;
    moved = !values.empty();
    for (unsigned n = 0; n < nodes_; ++n) moved = moved || !out_[n].empty();
    std::vector<std::vector<std::byte>> messages(nodes_);
    std::uint64_t sent = 0;
    for (unsigned n = 0; n < nodes_; ++n) {
      if (n == node_) continue;
      append(messages[n], RecordHeader{kRoundInfo, moved ? 1u : 0u, 0, state, slowest()}, {});
      messages[n].insert(messages[n].end(), out_[n].begin(), out_[n].end());
      messages[n].insert(messages[n].end(), values.begin(), values.end());
      sent += messages[n].size();
      out_[n].clear();
    }
    const auto incoming = across_->exchange(messages);
    me_.rounds.fetch_add(1, std::memory_order_relaxed);
    me_.sent_bytes.fetch_add(sent, std::memory_order_relaxed);
    bool end = state == kDone && !moved;
    std::uint64_t remote = ~std::uint64_t{0};
    int stopped_by = -1;
    for (unsigned n = 0; n < nodes_; ++n) {
      if (n == node_) continue;
      std::span<const std::byte> in(incoming[n]);
      RecordHeader info;
      HOGWILD_ENFORCE_LE(sizeof info, in.size());
      std::memcpy(&info, in.data(), sizeof info);
      HOGWILD_ENFORCE_EQ(info.tensor, kRoundInfo);
      in = in.subspan(sizeof info);
      end = end && info.replica == kDone && info.count == 0;
      if (info.replica == kStopping) stopped_by = static_cast<int>(n);
      remote = std::min(remote, info.clock);
      if (info.count) moved = true;
      while (!in.empty()) {
        RecordHeader h;
        HOGWILD_ENFORCE_LE(sizeof h, in.size());
        std::memcpy(&h, in.data(), sizeof h);
        const std::size_t n_bytes = body_bytes(h);
        HOGWILD_ENFORCE_LE(sizeof h + n_bytes, in.size());
        const auto body = in.subspan(sizeof h, n_bytes);
        in = in.subspan(sizeof h + n_bytes);
        if (h.tensor & kValues) {  // node n's new values: the copy of its part here
          const std::size_t t = h.tensor & ~(kValues | kDense);
          HOGWILD_ENFORCE_LT(t, shared_.count());
          const Slice theirs = part(t, n);  // (contiguous key ranges)
          float* w = shared_.data(t) + slice(t).begin;
          if (h.tensor & kDense) {
            HOGWILD_ENFORCE(h.first >= theirs.begin && std::size_t{h.first} + h.count <= theirs.end,
                            "values outside the sender's part");
            for (std::uint32_t k = 0; k < h.count; ++k)
              relaxed_store(w + h.first + k, value_at(body, k));
          } else {
            for (std::uint32_t k = 0; k < h.count; ++k) {
              const Pair p = pair_at(body, k);
              HOGWILD_ENFORCE(
                  p.index < slice(t).size() && mine(p.index) && node_of(t, p.index) == n,
                  "a value outside the sender's part");
              relaxed_store(w + p.index, p.value);
            }
          }
        } else {
          take(h, body, true);
        }
      }
    }
    me_.remote_slowest.store(remote, std::memory_order_release);
    // The pushes forwarded with the last round: applied by their owners then, their
    // values back with this one.
    for (unsigned r = 0; r < region_.replicas(); ++r)
      if (forwarded_[r] > 0)
        region_.replica(r).applied[server_].store(forwarded_[r], std::memory_order_release);
    forwarded_ = forwarding;
    if (stopped_by >= 0 && state != kStopping)
      throw CommError(fmt::format("parameter server {}: node {} stopped its run, so this node's "
                                  "stops too", server_, stopped_by));
    return end || state == kStopping;
  }

  const ParamSet& shared_;
  PsRegion region_;
  unsigned server_;
  Optimizer optimizer_;
  const std::atomic<std::int32_t>* stop_;
  Communicator* across_;
  unsigned node_, nodes_;
  PsServerSlot& me_;
  std::vector<ShmRing> rings_;
  static constexpr Slice kNoRun{~std::size_t{0}, 0};  // an empty run, min/max's identity
  std::vector<std::vector<std::uint32_t>> changed_;  // per tensor, within the slice
  std::vector<Slice> changed_run_;                   // per tensor: buckets' span, within it
  std::vector<std::vector<std::byte>> out_;          // per node: records for its part
  std::vector<std::vector<Pair>> others_;            // take()'s scratch
  // Per replica: the end of its latest push drained (its clock + 1), and as it was
  // when the last round began.
  std::vector<std::uint64_t> drained_, forwarded_;
};

}  // namespace

void serve(const ParamSet& shared, PsRegion region, unsigned server, Optimizer optimizer,
           const std::atomic<std::int32_t>* stop, Communicator* across) {
  Server(shared, region, server, optimizer, stop, across).run();
}

}  // namespace hogwild::detail
