// The worker's step loop: one epoch of mini-batches over the worker's rows. It owns
// everything around the model's step that every mode shares: the step size, the
// prefetch pipeline, the mode's lock, the bracket of the progress record around
// every write to the shared weights, the instruments (--telemetry, --grad-delay-ns,
// --straggler), and the stop, SIGTERM and parent-alive checks. What a mode adds
// comes through its parts (trainer/epoch_part.hpp); the model only steps
// (Model::train_batch).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "hogwild/model.hpp"
#include "hogwild/optimizer.hpp"
#include "memory/robust_mutex.hpp"
#include "hogwild/step_size.hpp"
#include "device/device_steps.hpp"
#include "trainer/epoch_part.hpp"
#include "trainer/progress.hpp"
#include "trainer/staleness.hpp"

namespace hogwild::detail {

struct EpochTask {
  const Dataset* data = nullptr;
  const float* targets = nullptr;
  std::span<const std::uint32_t> rows;  // this worker's rows for this epoch, in order
  // --balance steal (work_share.hpp): the share's word, where rows are claimed a
  // grain (`grain` rows) at a time; the loop trains only claimed rows and ends
  // when none is left to claim. Null: every row of `rows`.
  std::atomic<std::uint64_t>* share = nullptr;
  std::size_t grain = 0;
  // Added to the worker's count of examples for the step size: a thief trains
  // another share's rows at that share's place in the schedule.
  std::int64_t lr_shift = 0;
  std::size_t start = 0;                 // rows[0, start) were done by an earlier run
  double start_loss = 0;                 // their summed loss
  std::size_t batch = 1;
  StepSize step_size{};
  unsigned epoch = 0;
  unsigned workers = 1;
  StepKind kind{};  // the step's compilation: the mode's access policy, the optimiser
  ParamSet params;
  WorkerProgress* progress = nullptr;            // may be null (serial)
  const std::atomic<std::int32_t>* stop = nullptr;  // set by the parent to stop early
  const std::atomic<std::int32_t>* terminated = nullptr;  // this worker got SIGTERM
  std::int32_t parent = 0;  // a worker's parent pid: the loop ends when it is gone
  // What the mode, and its options, do around the steps (trainer/epoch_part.hpp),
  // in the order they do it: the mode's part (ddp's gradient sync, dp's threads,
  // ps's pushes, striped's stripes), a replica's merges, the node sync, the hot
  // window's flushes. None: plain hogwild.
  std::span<EpochPart* const> parts;
  // --telemetry: measures a sample of the steps' staleness (they write `params`).
  StalenessProbe* probe = nullptr;
  // Controlled experiments: busy work per example inside each update, and this
  // worker's updates made `slowdown` times as long (TrainConfig::grad_delay_ns,
  // straggler_factor).
  std::uint64_t delay_ns = 0;
  double slowdown = 1;
  // --device cuda: the steps are this worker's kernels, a chunk of rows a launch
  // (train_epoch then takes none of the paths above).
  DeviceSteps* device = nullptr;
  // --device cuda: what the mode does instead of the plain launches (ddp: each
  // mini-batch's gradient, which the ranks sum and apply every `accumulate`).
  DevicePart* device_part = nullptr;
};

// Trains t.rows[t.start, end) with `model` (end: the rows' end, or with t.share the
// end of the grains it could claim); returns the summed training loss of
// the epoch's rows (t.start_loss included), each example's computed before its own
// update. Publishes the worker's place in t.progress as it goes.
double train_epoch(Model& model, const EpochTask& t);

}  // namespace hogwild::detail
