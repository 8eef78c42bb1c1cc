#include "modes/hogwild/writer_parts.hpp"

#include <algorithm>

#include "modes/hogwild/hot_window.hpp"
#include "modes/hogwild/layout_probe.hpp"
#include "modes/hogwild/node_sync.hpp"
#include "modes/hogwild/replica.hpp"

namespace hogwild::detail {

// The options' "auto" is the interval's.
static_assert(TrainConfig::kMergeAuto == WriteBackInterval::kAuto);
static_assert(TrainConfig::kFlushAuto == WriteBackInterval::kAuto);

std::vector<Ranges> own_ranges(const ModeWorker& w) {
  if (w.row_ranges) return *w.row_ranges;
  std::vector<Ranges> mine;
  for (std::size_t t = 0; t < w.params.count(); ++t)
    mine.push_back(w.model->trained_ranges(t, *w.train, w.own_rows.first, w.own_rows.second));
  return mine;
}

SettledShares settled_features(const ModeWorker& w, std::size_t every,
                               std::span<const std::uint32_t> only) {
  // Two writers overshoot at most twice, which their merges' interleaving damps:
  // their runs end inside plain's accuracy band (docs/PERFORMANCE.md), and in a
  // build whose probe measured for two workers too, the measure, a pass over a
  // sample of the rows, cost SpamAssassin's runs 8 % in 40 interleaved pairs (its
  // 2^20 features). From three on the overshoot grows.
  if (w.config.workers < 3 || !replicas_sound(*w.model, *w.train)) return {};
  const double most = static_cast<double>(every == WriteBackInterval::kAuto ? WriteBackInterval::kAutoMax
                                                                            : every);
  return SettledShares::measure(*w.train, w.own_rows.first, w.own_rows.second, w.config.workers,
                                w.config.step_size.lr0 / static_cast<double>(std::max<std::size_t>(w.config.batch, 1)),
                                w.model->margin_curvature(), most, only);
}

MeanMerge bias_mean(const ModeWorker& w) {
  MeanMerge mean{std::vector<bool>(w.params.count(), false), w.config.workers};
  if (replicas_sound(*w.model, *w.train))
    for (std::size_t t = 1; t < mean.tensors.size(); ++t) mean.tensors[t] = true;
  return mean;
}

void add_writer_parts(const ModeWorker& w, const ModeDef& mode,
                      std::vector<std::unique_ptr<EpochPart>>& parts, RobustMutex* lock) {
  const TrainConfig& c = w.config;
  if (c.merge_every) {  // merging only what this worker's own rows can change
    MeanMerge mean = bias_mean(w);
    mean.features = settled_features(w, c.merge_every);
    parts.push_back(std::make_unique<Replica>(w.params, own_ranges(w), c.merge_every,
                                              mode.atomic_merges(), std::move(mean)));
  }
  if (c.hot_k && w.hot_window)  // (under --layout auto, the probe's: layout_probe.hpp)
    parts.push_back(std::make_unique<HotWindow>(w.params, *w.hot, w.hot_window, c.hot_flush,
                                                c.workers, w.hot_rows, lock,
                                                settled_features(w, c.hot_flush, *w.hot)));
  if (c.nodes > 1 && w.rank == 0)  // the node's leader
    parts.push_back(std::make_unique<NodeSync>(w.params, *w.node_base, w.across(), c.sync_every,
                                               c.sync_seconds, w.train->rows() / w.world,
                                               w.others_done));
}

}  // namespace hogwild::detail
