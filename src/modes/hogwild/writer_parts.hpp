// hogwild's options as parts of a worker's step loop, for the modes whose workers
// write the shared weights as they go (hogwild, atomic, lock, striped; each says so
// in its make_parts): --merge-every's replica (replica.hpp), --hot-k's window
// (hot_window.hpp) and, across nodes, the node leader's sync (node_sync.hpp).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "modes/hogwild/replica.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

// The coordinates of each tensor that worker `w`'s own rows can change
// (Model::trained_ranges): what its replica merges.
std::vector<Ranges> own_ranges(const ModeWorker& w);

// What w's replica merges as the mean of this node's workers' changes: a linear
// model's bias on sparse rows (Model::feature_indexed: its tensors past the first),
// which every example of every worker changes (replica.hpp says why); nothing for
// any other model or rows.
MeanMerge bias_mean(const ModeWorker& w);
// The features of tensor 0 that w's replica or hot window, merging every `every`
// examples (or WriteBackInterval::kAuto), adds as a share (settled_shares.hpp),
// measured on w's own rows: none with two workers or fewer, or where replicas are
// not sound (a model not feature_indexed, rows not sparse). only: a hot window's
// features, the only ones it measures (SettledShares::measure). The writer parts'
// replica and hot window take them; the probe's do not: measuring them cost
// SpamAssassin's runs of 4 workers 0.70x (12 interleaved pairs, the probe's figures
// taken while another worker measured: plain 3 times of 12), and the probe runs
// only at 2 to 4 workers, where the sum's overshoot is smallest.
SettledShares settled_features(const ModeWorker& w, std::size_t every,
                               std::span<const std::uint32_t> only = {});

// Appends the parts `w`'s options ask for, in the order they act after each batch
// and at the epoch's end: the replica's merge, the hot window's flush, then the
// node sync (whose last sync of an epoch then holds this worker's flushes too).
// lock: the mode's lock around each batch, held around each flush too (or null).
void add_writer_parts(const ModeWorker& w, const ModeDef& mode,
                      std::vector<std::unique_ptr<EpochPart>>& parts, RobustMutex* lock = nullptr);

}  // namespace hogwild::detail
