// Hogwild across nodes (--mode hogwild --nodes N --sync-every S): each node's
// workers train its own arena without locks, as on one machine, and worker 0 of
// every node (its leader) exchanges what its node learnt with the other leaders
// every S of its own examples (or about every S seconds) and at the end of each
// epoch. A sync averages the nodes' changes since the last one (delta = weights -
// base) over a Gloo group of the leaders (local SGD's model averaging), replaces
// this node's change by the mean in the shared weights, and moves the base by the
// mean: the bases stay the same on every node, and an update made on this node
// while the sync ran is in the next delta. What it costs (seconds in syncs) and the
// staleness it adds (a node sees the others' updates up to S x workers of their
// examples late; the summary's node_sync_lag_examples is the mean, measured) are in
// the run's summary.
//
// Every leader must make the same syncs in the same order (each is a collective),
// though the leaders' shares of an epoch differ by a row and their clocks by
// anything. So the schedule is positions in the epoch, the same on every node:
// sync k comes at the first mini-batch boundary at or after k x interval, for the
// positions up to `limit` (the smallest leader's share), and the count restarts
// each epoch. In seconds, the interval is S x the leaders' mean rate (examples a
// second of one leader), agreed at each sync; the first one at kFirstInterval
// examples measures it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <cstddef>
#include <vector>

#include "comm/communicator.hpp"
#include "hogwild/param_set.hpp"
#include "trainer/epoch_part.hpp"

namespace hogwild::detail {

class NodeSync final : public EpochPart {
 public:
  static constexpr std::size_t kFirstInterval = 1000;

  // shared: the node's arena tensors; base: their values before any worker started
  // (the same on every node: initialised from the seed, or a checkpoint's);
  // leaders: the group of node leaders; every_examples or every_seconds (one is
  // 0); limit: the fewest rows any leader trains in an epoch; others_done: waits
  // until this node's other workers finished the epoch the leader just did (false:
  // the run stopped first).
  NodeSync(const ParamSet& shared, const ParamSet& base, std::unique_ptr<Communicator> leaders,
           std::size_t every_examples, double every_seconds, std::size_t limit,
           std::function<bool()> others_done);
  // At the start of each epoch (or of its rest, resumed at `position`).
  void resume_at(std::size_t position = 0) noexcept;
  // After each mini-batch of the leader: true when a sync is due now.
  bool due(std::size_t examples) noexcept;
  void sync();
  std::size_t syncs() const noexcept { return syncs_; }
  // The other nodes' leaders' examples merged in by the syncs so far: times the
  // workers per node, what this node saw late (each up to one interval).
  double others() const noexcept { return others_; }
  double seconds() const noexcept { return seconds_; }

  // Its part of the leader's step loop: a sync when due, and at the end of a whole
  // epoch, once the node's other workers are done with it too, a last one: after
  // the last epoch every node then holds the same weights.
  void begin_epoch(std::span<const std::uint32_t>, std::size_t start) override {
    resume_at(start);
  }
  bool after_batch(const Batch& b, float, const EpochPlace& place) override {
    return !due(b.size) || place.collective([&] { sync(); });
  }
  void end_epoch(float, const EpochPlace& place, bool whole) override {
    if (whole && !place.interrupted() && others_done_()) place.collective([&] { sync(); });
  }
  void report(WorkerProgress& p) const override;

 private:
  using Clock = std::chrono::steady_clock;
  // The next point of the schedule after `position`.
  std::size_t next_after(std::size_t position) const noexcept {
    return (position / interval_ + 1) * interval_;
  }

  ParamSet shared_;
  std::unique_ptr<Communicator> leaders_;
  std::function<bool()> others_done_;
  double every_seconds_;
  std::size_t limit_, interval_;
  std::size_t position_ = 0, next_ = 0;  // in this epoch
  std::size_t examples_ = 0;             // since the last sync, for the rate
  Clock::time_point last_;
  std::vector<std::vector<float>> base_;
  std::vector<float> delta_, read_;
  std::size_t syncs_ = 0;
  double seconds_ = 0, others_ = 0;
};

}  // namespace hogwild::detail
