// What --layout comes to before the workers start: whether the run probes and
// why not, what the probe may offer (hot coordinates), the layouts that --layout
// hot and replicas make concrete, and the line that says so before the run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/model.hpp"
#include "hogwild/trainer.hpp"
#include "modes/hogwild/layout_rule.hpp"

namespace hogwild::detail {

// What --layout resolves to before the workers start: why a run does not probe
// (a layout given or implied by --merge-every or --hot-k, one worker, more than
// kMaxWorkers, AdaGrad, another mode, several nodes, the GPU, the instruments, a
// model and rows that are not replicas_sound: TrainConfig::replicas_unsound), or
// nullopt when it probes. `workers`: this node's.
std::optional<std::string> no_probe(const TrainConfig& c, unsigned workers);

// Whether --layout auto may choose replicas for `model` on `train`: a model that is
// Model::feature_indexed on sparse rows, whose replica merges the bias as the
// workers' mean (bias_mean, writer_parts.hpp, asks this), the case whose accuracy was measured
// with replicas inside plain's seed band. Every other model's replica adds each
// worker's whole change to the coordinates every example moves (a dense row's
// weights, a softmax's or an MLP's biases), the overshoot the linear bias had.
// Measured on Fashion-MNIST softmax (2 workers, 3 epochs, 2 runs of 5 seeds):
// replicas ended near accuracy 0.79 in 3 of 10 runs, plain in 1 of 10 — not
// settled, so auto keeps plain there (at 0.97-1.02 of the ceiling, as fast as
// replicas). --layout replicas still forces them on any model.
bool replicas_sound(const Model& model, const Dataset& train);
// Sets c.replicas_unsound from it (under --layout auto; false otherwise): what
// resolve_layout does for auto, and the CLI's header line before the run.
void mark_replicas_unsound(TrainConfig& c, const Model& model, const Dataset& train);

// Whether a probing run offers hot coordinates too: it probes (no_probe), its model
// and rows can have them (replicas_sound, which no_probe asks), its arena is on
// /dev/shm (a --shm-dir on hugetlbfs cannot take the window's small private pages:
// --hot-k there is a clear error, which auto must not make), and the copy of the
// rows' indices they need is at most kHotCopyMost. That copy is shared by the
// workers, but it is the one thing a hot window adds to the rows' memory (4 bytes a
// non-zero): 10 MiB on SpamAssassin, 144 MiB on RCV1-like, which would take that
// run past its memory target (data + model + 30 MiB a worker) where replicas
// already reach 0.9 of the ceiling. Hot's K: hot_features(train).
inline constexpr std::uint64_t kHotCopyMost = 32 << 20;
bool probe_offers_hot(const TrainConfig& c, unsigned workers, const Dataset& train);
// --layout hot's K, and the probe's: the features in at least 1/kHotShare of
// `train`'s rows (at least 1, at most kHotMost).
std::size_t hot_features(const Dataset& train);
// The probe's hot features, where it offers them (else none): the hot_features(train)
// most frequent among the first `features` (the model's tensor 0), from one pass
// over the rows.
std::vector<std::uint32_t> probe_hot_features(const TrainConfig& c, unsigned workers,
                                              const Dataset& train, std::size_t features);

// The line that says before the run what will write the shared weights: the layout
// and why, or what the probe will weigh.
std::string layout_plan(const TrainConfig& c, unsigned workers, const Dataset& train);

// The layout of a run that does not probe: what --merge-every or --hot-k set, else
// the --layout given, else (auto without a probe) plain.
const char* fixed_layout(const TrainConfig& c) noexcept;

// --layout replicas and hot, made concrete when the run starts: --merge-every auto,
// and --hot-k as the features in at least 1/kHotShare of `train`'s rows (at least 1,
// at most kHotMost), unless the option was given; auto: replicas_unsound from
// replicas_sound. ConfigError for hot with a model that is not
// Model::feature_indexed, or on rows that are not sparse. (A worker started from a
// description, whose options carry what the parent resolved, marks
// replicas_unsound again itself.)
inline constexpr std::size_t kHotShare = 64, kHotMost = 4096;
void resolve_layout(TrainConfig& c, const Dataset& train, const Model& model);

}  // namespace hogwild::detail
