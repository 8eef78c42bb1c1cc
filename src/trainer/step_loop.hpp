// The worker's step loop: one epoch of mini-batches over the worker's rows. It owns
// everything around the model's step: the step size, the prefetch pipeline, the
// mode's lock, the replica's merges, the hot window's flushes and the synchronous
// modes' gradient steps, the bracket of
// the progress record around every write to the shared weights, and the stop,
// SIGTERM and parent-alive checks. The model only steps (Model::train_batch).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "hogwild/model.hpp"
#include "hogwild/optimizer.hpp"
#include "memory/robust_mutex.hpp"
#include "hogwild/step_size.hpp"
#include "trainer/data_parallel.hpp"
#include "trainer/device_steps.hpp"
#include "trainer/device_sync.hpp"
#include "trainer/ps.hpp"
#include "trainer/gradient_sync.hpp"
#include "trainer/hot_window.hpp"
#include "trainer/node_sync.hpp"
#include "trainer/progress.hpp"
#include "trainer/replica.hpp"
#include "trainer/staleness.hpp"

namespace hogwild::detail {

struct EpochTask {
  const Dataset* data = nullptr;
  const float* targets = nullptr;
  std::span<const std::uint32_t> rows;  // this worker's rows for this epoch, in order
  std::size_t start = 0;                 // rows[0, start) were done by an earlier run
  double start_loss = 0;                 // their summed loss
  std::size_t batch = 1;
  StepSize step_size{};
  unsigned epoch = 0;
  unsigned workers = 1;
  StepKind kind{};  // the step's compilation: the mode's access policy, the optimiser
  ParamSet params;
  WorkerProgress* progress = nullptr;            // may be null (serial)
  RobustMutex* mutex = nullptr;  // held around each batch and flush (ModeDef::locks_batches)
  const std::atomic<std::int32_t>* stop = nullptr;  // set by the parent to stop early
  const std::atomic<std::int32_t>* terminated = nullptr;  // this worker got SIGTERM
  std::int32_t parent = 0;  // a worker's parent pid: the loop ends when it is gone
  // --merge-every: the worker's private copy. The step then trains it, and `params`
  // is the shared set it is merged into every `every` examples and at the epoch's end.
  Replica* replica = nullptr;
  // --hot-k: the worker's copies of the hot coordinates. The step then trains
  // hot->params() (over `data`, whose rows the parent renumbered), flushed every
  // hot_flush examples and at the epoch's end.
  HotWindow* hot = nullptr;
  // A synchronous mode (ddp): the step trains sync->params() (the shared weights
  // with this worker's gradient buffers), and every `accumulate` mini-batches the
  // workers combine their gradients and update the weights together.
  GradientSync* sync = nullptr;
  // --mode dp: each mini-batch is split among this process's threads, each with a
  // model of its own, and applied once (`model` is then not stepped).
  DataParallel* dp = nullptr;
  // Hogwild across nodes, worker 0: exchanges with the other nodes every
  // sync_every of its examples (and, in Run::run_epoch, at the epoch's end).
  NodeSync* node_sync = nullptr;
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
  // --device cuda --mode ddp: the device's steps compute each mini-batch's gradient,
  // which the ranks sum and apply every `accumulate` mini-batches.
  DeviceGradientSync* device_sync = nullptr;
  // --mode ps: the step trains the replica's private copy (ps->params()); after each
  // mini-batch the replica pushes and fetches when due, and pushes at the epoch's end.
  PsClient* ps = nullptr;
};

// Trains t.rows[t.start, end) with `model`; returns the summed training loss of
// the epoch's rows (t.start_loss included), each example's computed before its own
// update. Publishes the worker's place in t.progress as it goes.
double train_epoch(Model& model, const EpochTask& t);

}  // namespace hogwild::detail
