#include "trainer/step_loop.hpp"

#include <algorithm>
#include <chrono>

#include "hogwild/prefetch.hpp"
#include "process.hpp"

namespace hogwild::detail {

namespace {

// Runs f() holding the mode's lock, if it has one.
template <class F>
decltype(auto) locked(RobustMutex* mutex, F&& f) {
  if (!mutex) return f();
  RobustLock guard(*mutex);
  return f();
}

// The run was stopped, or this worker got SIGTERM: the epoch ends after its batch.
bool interrupted(const EpochTask& t) noexcept {
  return (t.stop && t.stop->load(std::memory_order_relaxed)) ||
         (t.terminated && t.terminated->load(std::memory_order_relaxed));
}

// Runs a collective; false when the run stopped (or this worker got SIGTERM)
// while it waited for the others, which is then how the epoch ends here too. Any
// other failure (a dead peer, the timeout) propagates: the worker fails.
template <class F>
bool stopped_in(const EpochTask& t, F&& collective) {
  try {
    collective();
    return true;
  } catch (const CommError&) {
    if (interrupted(t)) return false;
    throw;
  }
}

// Busy work (not a sleep: the core is taken, as a longer gradient would take it).
void busy_until(std::chrono::steady_clock::time_point end) noexcept {
  while (std::chrono::steady_clock::now() < end) {
  }
}

// The non-zeros a mini-batch's rows hold: the size of its update.
std::uint64_t nonzeros(const Batch& b) noexcept {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < b.size; ++i) n += b.data->row(b.rows[i]).nnz;
  return n;
}

bool synced_step(GradientSync& sync, const EpochTask& t, float lr) {
  return stopped_in(t, [&] { sync.step(lr); });
}

// --device cuda: a kernel launch per chunk of rows, each example's update written
// straight to the shared device weights; the place is published after each chunk
// (a crash retrains at most the chunk in flight, as the CPU's 64 mini-batches).
// Under ddp a launch is a mini-batch's gradient, and every `accumulate` of them the
// ranks sum and apply theirs.
double train_epoch_device(const EpochTask& t) {
  double loss = t.start_loss;
  const std::size_t n = t.rows.size();
  std::uint64_t seen = t.progress ? t.progress->samples.load(std::memory_order_relaxed) : 0;
  const double epoch_lr = t.step_size.epoch_start(t.epoch);
  DeviceGradientSync* sync = t.device_sync;
  const std::size_t chunk = sync ? std::max<std::size_t>(t.batch, 1) : t.device->chunk();
  t.device->begin_epoch(t.rows);
  std::size_t begin = std::min(t.start, n);
  while (begin < n) {
    if (interrupted(t)) break;
    if (orphaned(t.parent)) break;
    const std::size_t size = std::min(chunk, n - begin);
    const float lr = t.step_size.at_epoch_lr(epoch_lr, seen * t.workers);
    if (t.progress) begin_writes(*t.progress, seen + size);
    if (sync) {
      loss += sync->gradient(begin, size, lr);
      if (sync->due() && !stopped_in(t, [&] { sync->step(lr); })) break;
    } else {
      loss += t.device->train(begin, size, lr);
    }
    seen += size;
    begin += size;
    if (t.progress) {
      t.progress->samples.store(seen, std::memory_order_release);
      publish_record(*t.progress, seen, begin, loss);
    }
  }
  // The epoch's last mini-batches (fewer than --accumulate): every rank has the same
  // count of rows, so all of them get here.
  if (sync && sync->pending() && begin >= n)
    stopped_in(t, [&] { sync->step(t.step_size.at_epoch_lr(epoch_lr, seen * t.workers)); });
  return loss;
}

}  // namespace

double train_epoch(Model& model, const EpochTask& t) {
  model.check_rows(*t.data);
  if (t.device) return train_epoch_device(t);
  double loss = t.start_loss;
  const std::size_t n = t.rows.size();
  const std::size_t batch = t.batch ? t.batch : 1;
  std::uint64_t seen = t.progress ? t.progress->samples.load(std::memory_order_relaxed) : 0;
  const double epoch_lr = t.step_size.epoch_start(t.epoch);
  model.begin_epoch(t.rows);
  if (t.dp) t.dp->begin_epoch(t.rows);
  const ParamSet& trained = t.sync      ? t.sync->params()
                            : t.ps      ? t.ps->params()
                            : t.replica ? t.replica->params()
                            : t.hot     ? t.hot->params()
                                        : t.params;
  // Straight to the shared weights: the step's writes are bracketed (WorkerProgress);
  // a private replica or window is bracketed at its merge.
  const bool shared = t.progress && !t.replica && !t.hot && !t.ps;
  // A pipeline over the next rows: offsets, then the row's data, then (for a model
  // whose rows name scattered parameter rows, like MF's two factor rows) the
  // parameters it will touch, each stage one batch after the one it needs. (The
  // offsets stage measured 9 % slower for the linear model on RCV1-like, whose step
  // starts on the row right away; MF gained 53 % with it.)
  const bool params = model.prefetches_params();
  const std::size_t ahead = params ? 2 : 1;  // how far ahead the row's data is
  std::size_t begin = std::min(t.start, n);  // a restarted worker resumes mid-epoch
  for (std::size_t k = 0; begin < n; ++k) {
    if (interrupted(t)) break;
    const std::size_t size = std::min(batch, n - begin);
    const Batch b{t.data, t.targets, t.rows.data() + begin, size};
    if (params && begin + (ahead + 1) * size < n)
      prefetch_offsets(*t.data, t.rows[begin + (ahead + 1) * size]);
    if (begin + ahead * size < n) prefetch_row(*t.data, t.rows[begin + ahead * size]);
    if (batch > 1 && begin + ahead * size + 1 < n)
      prefetch_row(*t.data, t.rows[begin + ahead * size + 1]);
    if (params && begin + size < n) model.prefetch_params(trained, t.data->row(t.rows[begin + size]));
    const float lr = t.step_size.at_epoch_lr(epoch_lr, seen * t.workers);
    if (shared) begin_writes(*t.progress, seen + size);
    if (t.dp) {
      loss += t.dp->train_batch(t.kind, b, lr);
    } else if (!t.probe && !t.delay_ns && t.slowdown == 1) {
      loss += locked(t.mutex, [&] { return model.train_batch(t.kind, b, trained, lr); });
    } else {
      // --telemetry: the update's reads begin inside the lock, and it counts as
      // finished there too (lock mode's lag is then 0, as it is). The injected
      // work is inside the update, under the lock where there is one.
      const bool measured = t.probe && t.probe->due();
      const bool timed = t.delay_ns || t.slowdown > 1;  // the clock costs 20 ns an update
      loss += locked(t.mutex, [&] {
        const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
        if (measured) t.probe->start();
        if (t.delay_ns) busy_until(t0 + std::chrono::nanoseconds(t.delay_ns * size));
        const double l = model.train_batch(t.kind, b, trained, lr);
        if (t.slowdown > 1)
          busy_until(t0 + std::chrono::duration_cast<std::chrono::nanoseconds>(
                              (std::chrono::steady_clock::now() - t0) * t.slowdown));
        if (t.probe) t.progress->samples.store(seen + size, std::memory_order_release);
        if (measured) t.probe->finish(nonzeros(b));
        return l;
      });
    }
    if (t.sync && t.sync->due(b) && !synced_step(*t.sync, t, lr)) break;
    seen += size;
    begin += size;
    if (shared) t.progress->samples.store(seen, std::memory_order_release);
    // With a replica or hot coordinates, the position is published only once its
    // rows are merged or flushed: what a crash loses is the private copy, and a
    // respawned worker then retrains exactly the rows whose updates were in it.
    if (t.replica && t.replica->due(size)) {
      if (t.progress) begin_writes(*t.progress, seen);
      t.replica->merge();
      if (t.progress) publish_record(*t.progress, seen, begin, loss);
    }
    // A replica's place is published at its pushes: a crash loses the updates it had
    // not pushed, and a respawned replica trains those rows again.
    if (t.ps) {
      const std::uint64_t pushes = t.ps->pushes();
      if (!t.ps->after_batch(b, lr)) break;
      if (t.progress && t.ps->pushes() != pushes) {
        begin_writes(*t.progress, seen);
        publish_record(*t.progress, seen, begin, loss);
      }
    }
    if (t.node_sync && t.node_sync->due(size) && !stopped_in(t, [&] { t.node_sync->sync(); }))
      break;
    if (t.hot && t.hot->due(size)) {
      if (t.progress) begin_writes(*t.progress, seen);
      locked(t.mutex, [&] { t.hot->flush(); });  // under lock, as every other update
      if (t.progress) publish_record(*t.progress, seen, begin, loss);
    }
    if ((k & 63) == 63) {
      if (shared) publish_record(*t.progress, seen, begin, loss);
      if (orphaned(t.parent)) break;
    }
  }
  // The epoch's last mini-batches (fewer than --accumulate) are combined too: every
  // worker has the same count of rows, so all of them get here.
  if (t.sync && t.sync->pending() && begin >= n)
    synced_step(*t.sync, t, t.step_size.at_epoch_lr(epoch_lr, seen * t.workers));
  if (t.ps) t.ps->flush(t.step_size.at_epoch_lr(epoch_lr, seen * t.workers));
  if ((t.replica || t.hot) && t.progress) begin_writes(*t.progress, seen);
  if (t.replica) t.replica->merge();  // also when the epoch was cut short
  if (t.hot) locked(t.mutex, [&] { t.hot->flush(); });
  model.end_epoch();
  if (t.dp) t.dp->end_epoch();
  if (t.progress) publish_record(*t.progress, seen, begin, loss);
  return loss;
}

}  // namespace hogwild::detail
