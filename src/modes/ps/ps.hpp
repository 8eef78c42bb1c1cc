// The parameter server on one machine (--mode ps, Downpour SGD): the weights in the
// run's arena are the servers' shards — server s alone writes its slice of every
// tensor (slice_of) and the optimiser state beside it — and each replica (a
// worker) trains a private copy of the weights, capturing its gradients
// (GradientCapture). Every push_every mini-batches a replica pushes what it
// accumulated, the non-zero coordinates of each server's slice, as records on a
// shared-memory ring of its own to that server (comm/ring.hpp): the keys the model
// lists (sorted, unique pairs of index and value), or, for a tensor scanned whole, a
// bucket (the values of a run of consecutive coordinates) wherever at least half
// of the run is non-zero, pairs elsewhere; every fetch_every
// mini-batches it copies the weights back from the arena, once every server has
// applied its pushes so far (it reads its own updates). A replica's clock counts
// its pushes; with a staleness bound S a replica waits before a push while its
// clock is more than S ahead of the slowest replica still training (stale-
// synchronous parallel; S = 0 is bulk-synchronous).
//
// Reads of the arena's weights race with the servers' writes: THE INTENDED RACE of
// a parameter server's pull, relaxed atomic loads and stores as in hogwild mode.
// Each coordinate has one writer (its server), so no pushed update is lost.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "comm/ring.hpp"
#include "comm/communicator.hpp"
#include "hogwild/batch.hpp"
#include "hogwild/model.hpp"
#include "hogwild/optimizer.hpp"
#include "hogwild/param_set.hpp"
#include "hogwild/rng.hpp"
#include "trainer/epoch_part.hpp"

namespace hogwild::detail {

// A replica's clock and measurements, in the arena.
struct alignas(128) PsReplicaSlot {
  std::atomic<std::uint64_t> clock{0};   // pushes made
  std::atomic<std::uint32_t> done{0};    // 1 once it pushed its last
  std::atomic<std::uint64_t> pulls{0};
  std::atomic<std::uint64_t> gap_sum{0};  // clock - slowest clock, at each pull
  std::atomic<std::uint64_t> gap_max{0};
  std::atomic<std::uint64_t> push_gap_sum{0};  // clock - slowest clock, as each push starts
  std::atomic<std::uint64_t> push_gap_max{0};
  std::atomic<std::uint64_t> bytes{0};    // pushed
  std::atomic<std::uint64_t> wait_ns{0};  // waiting for the staleness bound or a full ring
  // Examples trained since the last push (the replica writes it): what its death
  // loses. The supervisor adds it to `lost` before it respawns the replica.
  std::atomic<std::uint64_t> unpushed{0};
  std::atomic<std::uint64_t> lost{0};
  // applied[s]: how many of this replica's pushes server s has applied (s writes it).
  // A fetch waits until every server has applied the replica's pushes before it, as
  // a request queued behind them at a Downpour server would: a replica reads its
  // own updates.
  static constexpr unsigned kMaxServers = 64;
  std::atomic<std::uint64_t> applied[kMaxServers] = {};
};

struct alignas(128) PsServerSlot {
  std::atomic<std::uint64_t> records{0};  // applied
  std::atomic<std::uint64_t> keys{0};
  // Across nodes: the slowest clock of the other nodes' replicas still training, as
  // the last round told (UINT64_MAX: none, or one node), rounds made, bytes sent.
  std::atomic<std::uint64_t> remote_slowest{~std::uint64_t{0}};
  std::atomic<std::uint64_t> rounds{0};
  std::atomic<std::uint64_t> sent_bytes{0};
  // On one machine a server that dies is replaced (the arena keeps its shard and
  // its rings), and the replacement finishes the record it died in, exactly once:
  // the record's ring (a replica; kNone: none) and position there, the blocks of
  // kUndoBlock coordinates done, and the block in flight's old values (an undo log
  // of one block: the values, then the block's number, then the writes, then the
  // count of blocks done).
  static constexpr std::uint32_t kNone = ~0u;
  static constexpr std::uint32_t kUndoBlock = 256;
  std::atomic<std::uint32_t> ring{kNone};
  std::atomic<std::uint64_t> position{0};
  std::atomic<std::uint32_t> blocks_done{0};
  std::atomic<std::uint32_t> undo_block{kNone};
  float undo_w[kUndoBlock] = {}, undo_G[kUndoBlock] = {};  // written with relaxed_store
  std::atomic<std::uint64_t> recovered{0};  // records a replacement finished
};

// Hashed key ranges (--key-ranges hashed): coordinate k of every tensor belongs to
// server key_hash(k) % S, and across nodes to part key_hash(k) / S % N of it, so
// that popular low ids (Zipf features, the first users) spread over the servers;
// contiguous ranges (the default) give server s slice_of(size, s, S). The hash is
// splitmix64's finaliser, high half.
constexpr std::uint32_t key_hash(std::uint64_t k) noexcept {
  return static_cast<std::uint32_t>(mix64(k + kGolden64) >> 32);
}

class PsRegion {
 public:
  static constexpr std::size_t kRingBytes = std::size_t{256} << 10;
  static std::size_t bytes(unsigned replicas, unsigned servers);
  // `nodes` > 1: the other nodes' replicas count for the staleness bound (from the
  // servers' rounds; until the first, as if at clock 0).
  // `hashed`: hashed key ranges (key_hash), else contiguous.
  static void prepare(std::span<std::byte> region, unsigned replicas, unsigned servers,
                      unsigned nodes = 1, bool hashed = false);
  explicit PsRegion(std::span<std::byte> region);

  unsigned replicas() const noexcept { return replicas_; }
  unsigned servers() const noexcept { return servers_; }
  bool hashed() const noexcept { return hashed_; }
  PsReplicaSlot& replica(unsigned r) const noexcept { return replica_[r]; }
  PsServerSlot& server(unsigned s) const noexcept { return server_[s]; }
  ShmRing ring(unsigned replica, unsigned server) const;
  // How many pushes `clock` is ahead of the slowest replica still training, on any
  // node (0 when none is, or when it is not ahead).
  std::uint64_t ahead(std::uint64_t clock) const noexcept;

 private:
  unsigned replicas_ = 0, servers_ = 0;
  bool hashed_ = false;
  PsReplicaSlot* replica_ = nullptr;
  PsServerSlot* server_ = nullptr;
  std::byte* rings_ = nullptr;
};

struct PsOptions {
  std::size_t push_every = 1, fetch_every = 1;
  long staleness = -1;  // < 0: no bound
  Optimizer optimizer = Optimizer::sgd;
  // The model, which lists the keys each mini-batch may change (Model::touched):
  // a tensor whose keys it lists is pushed and fetched at those keys only (and in
  // whole by the fetch at each epoch's start); the others are scanned whole for
  // non-zero updates and fetched whole. Null: every tensor whole.
  const Model* model = nullptr;
};

// A replica's side.
class PsClient final : public EpochPart {
 public:
  // `shared`: the arena's weights (and state); `stop`: the run's stop flag.
  PsClient(const ParamSet& shared, PsRegion region, unsigned rank, PsOptions options,
           const std::atomic<std::int32_t>* stop);
  // The private copy the step trains, with its gradient buffers.
  const ParamSet& params() const noexcept { return params_; }
  // After each mini-batch `b`: pushes and fetches when due. False when the run
  // stopped while it waited.
  bool after_batch(const Batch& b, float lr);
  // Pushes what is accumulated (the epoch's end).
  bool flush(float lr);
  // The last push, then done: servers stop waiting for this replica (the worker's
  // last act, EpochPart::finish).
  void finish(float lr) override;
  // Copies the weights from the servers' shards: all of them, or (`all` false) the
  // keys pushed since the last fetch of the tensors the model lists keys for, and
  // the other tensors whole.
  void fetch(bool all = true);
  // Pushes made by this process.
  std::uint64_t pushes() const noexcept { return pushes_; }

  // Its part of the step loop: the steps train the private copy, and the replica's
  // place is published at its pushes: a crash loses the updates it had not pushed,
  // and a respawned replica trains those rows again.
  const ParamSet* trained() const noexcept override { return &params(); }
  bool writes_later() const noexcept override { return true; }
  bool after_batch(const Batch& b, float lr, const EpochPlace& place) override {
    const std::uint64_t before = pushes_;
    if (!after_batch(b, lr)) return false;
    if (pushes_ != before) {
      place.open();
      place.publish();
    }
    return true;
  }
  void end_epoch(float lr, const EpochPlace&, bool) override { flush(lr); }
  // Every epoch starts from the servers' whole weights (the first from those the
  // constructor fetched).
  void begin_epoch(std::span<const std::uint32_t>, std::size_t) override {
    if (begun_) fetch();
    begun_ = true;
  }

 private:
  bool push(float lr);
  // Waits (pause) until done() holds; false, at once, when the run stopped.
  template <class Done>
  bool wait_until(Done&& done) const;
  ParamSet shared_;
  PsRegion region_;
  unsigned rank_;
  PsOptions options_;
  const std::atomic<std::int32_t>* stop_;
  std::vector<std::vector<float>> data_, grad_;
  ParamSet params_;
  std::size_t batches_ = 0;
  bool pending_ = false;
  std::uint64_t pushes_ = 0;
  bool begun_ = false;  // an epoch began
  // Per tensor: the keys touched since the last push and pushed since the last
  // fetch; whether a mini-batch since the last push had no list (scan it whole),
  // and whether a push since the last fetch did (fetch it whole).
  std::vector<std::vector<std::uint32_t>> touched_, pushed_keys_;
  std::vector<char> scan_, fetch_whole_;
};

// Server `s`'s loop: applies every replica's records to its slices until every
// replica is done and its rings are empty, or the run stops. On one machine it
// first finishes the record a server it replaces died in (PsServerSlot).
//
// Across nodes (`across`: the group of server s of every node, Gloo), the servers
// are spread over the nodes: server s of node n owns part n of slice s
// (slice_of(slice, n, nodes)) and is the one writer of it there, and the other
// parts of slice s in its arena are copies. It applies what its node's replicas
// push to its part and forwards the rest to the owners, in rounds: each round
// every server of the group sends each other one message (Communicator::exchange,
// Gloo point to point) holding the records for that node's part, the new values of
// the coordinates its own part changed since the last round, its node's slowest
// clock (for the staleness bound) and whether its node is done. A replica's push
// counts as applied (its fetch may read it) once the round after the one that
// forwarded it has brought the owners' changed values back: a replica reads its own
// updates on every node's part, as on one machine. (Without that wait a replica
// trains on weights missing its last rounds of pushes and pushes much the same
// gradient again: Fashion-MNIST softmax on two nodes fell from 0.83 to 0.59.) The
// group ends together, after a round in which every node was done and nothing
// moved.
void serve(const ParamSet& shared, PsRegion region, unsigned server, Optimizer optimizer,
           const std::atomic<std::int32_t>* stop, Communicator* across = nullptr);

}  // namespace hogwild::detail
