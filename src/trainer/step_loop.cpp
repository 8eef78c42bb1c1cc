#include "trainer/step_loop.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "hogwild/prefetch.hpp"
#include "process.hpp"
#include "trainer/work_share.hpp"

namespace hogwild::detail {

namespace {

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

// --device cuda: a kernel launch per chunk of rows, each example's update written
// straight to the shared device weights; the place is published after each chunk
// (a crash retrains at most the chunk in flight, as the CPU's 64 mini-batches).
// A mode's device part takes the launches instead (ddp: a mini-batch's gradient a
// launch, and every `accumulate` of them the ranks sum and apply theirs).
double train_epoch_device(const EpochTask& t) {
  double loss = t.start_loss;
  const std::size_t n = t.rows.size();
  std::uint64_t seen = t.progress ? t.progress->samples.load(std::memory_order_relaxed) : 0;
  const double epoch_lr = t.step_size.epoch_start(t.epoch);
  DevicePart* part = t.device_part;
  const EpochPlace flags{t.progress, t.stop, t.terminated};
  const std::size_t chunk = part ? part->chunk() : t.device->chunk();
  t.device->begin_epoch(t.rows);
  std::size_t begin = std::min(t.start, n);
  while (begin < n) {
    if (flags.interrupted()) break;
    if (orphaned(t.parent)) break;
    const std::size_t size = std::min(chunk, n - begin);
    const float lr = t.step_size.at_epoch_lr(epoch_lr, seen * t.workers);
    if (t.progress) begin_writes(*t.progress, seen + size);
    if (part) {
      if (!part->train(begin, size, lr, flags, loss)) break;
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
  if (part) part->end_epoch(t.step_size.at_epoch_lr(epoch_lr, seen * t.workers), flags, begin >= n);
  return loss;
}

}  // namespace

double train_epoch(Model& model, const EpochTask& t) {
  model.check_rows(*t.data);
  if (t.device) return train_epoch_device(t);
  const std::size_t n = t.rows.size();
  const std::size_t batch = t.batch ? t.batch : 1;
  std::uint64_t seen = t.progress ? t.progress->samples.load(std::memory_order_relaxed) : 0;
  std::size_t begin = std::min(t.start, n);  // a restarted worker resumes mid-epoch
  double loss = t.start_loss;
  // The place as the parts see it (kept in locals here: a plain run has no parts).
  const EpochPlace flags{t.progress, t.stop, t.terminated};
  auto place = [&] { return EpochPlace{t.progress, t.stop, t.terminated, seen, begin, loss}; };
  const auto scheduled = [&](std::uint64_t s) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(s) + t.lr_shift);
  };
  const double epoch_lr = t.step_size.epoch_start(t.epoch);
  // The parts that act: one idle for the rest of the run (a probe that chose plain)
  // is left out by ask_parts, so that its loop is plain's.
  std::vector<EpochPart*> parts(t.parts.begin(), t.parts.end());
  EpochPart* stepper = nullptr;
  for (EpochPart* part : parts)
    if (part->takes_steps()) stepper = part;
  // What the steps train, and whether straight to the shared weights: then the
  // step's writes are bracketed (WorkerProgress); a private replica or window is
  // bracketed by its part when it writes them. Asked again after each batch while a
  // part is not settled (--layout auto's probe).
  const ParamSet* trained = &t.params;
  const Dataset* data = t.data;  // the rows the steps read (a hot window's renumbered copy)
  bool shared = false, settled = true;
  const auto ask_parts = [&] {
    trained = &t.params;
    data = t.data;
    bool later = false;
    settled = true;
    std::erase_if(parts, [](EpochPart* part) { return part->idle(); });
    for (EpochPart* part : parts) {
      if (const ParamSet* own = part->trained()) trained = own;
      if (const Dataset* own = part->rows()) data = own;
      later = later || part->writes_later();
      settled = settled && part->settled();
    }
    shared = t.progress && !later;
  };
  ask_parts();
  model.begin_epoch(t.rows);
  for (EpochPart* part : parts) part->begin_epoch(t.rows, std::min(t.start, n));
  // A pipeline over the next rows: offsets, then the row's data, then (for a model
  // whose rows name scattered parameter rows, like MF's two factor rows) the
  // parameters it will touch, each stage one batch after the one it needs. (The
  // offsets stage measured 9 % slower for the linear model on RCV1-like, whose step
  // starts on the row right away; MF gained 53 % with it.)
  const bool params = model.prefetches_params();
  const std::size_t ahead = params ? 2 : 1;  // how far ahead the row's data is
  // --balance steal: the rows claimed so far end at `end`; the next grain is
  // claimed as the loop reaches it, unless a thief has lowered the share's limit.
  std::size_t end = t.share ? std::min(n, claimed_rows(*t.share, t.grain)) : n;
  for (std::size_t k = 0;; ++k) {
    if (begin >= end && (!t.share || (end = claim_grain(*t.share, t.grain, n)) <= begin)) break;
    if (flags.interrupted()) break;
    const std::size_t size = std::min(batch, end - begin);
    const Batch b{data, t.targets, t.rows.data() + begin, size};
    if (params && begin + (ahead + 1) * size < n)
      prefetch_offsets(*data, t.rows[begin + (ahead + 1) * size]);
    if (begin + ahead * size < n) prefetch_row(*data, t.rows[begin + ahead * size]);
    if (batch > 1 && begin + ahead * size + 1 < n)
      prefetch_row(*data, t.rows[begin + ahead * size + 1]);
    if (params && begin + size < n) model.prefetch_params(*trained, data->row(t.rows[begin + size]));
    const float lr = t.step_size.at_epoch_lr(epoch_lr, scheduled(seen) * t.workers);
    if (shared) begin_writes(*t.progress, seen + size);
    for (EpochPart* part : parts) part->enter_step(b);
    if (stepper) {
      loss += stepper->train_batch(t.kind, b, lr);
    } else if (!t.probe && !t.delay_ns && t.slowdown == 1) {
      loss += model.train_batch(t.kind, b, *trained, lr);
    } else {
      // --telemetry: the update's reads begin inside the parts' enter_step (lock's
      // mutex, striped's stripes), and it counts as finished there too (lock mode's
      // lag is then 0, as it is). The injected work is inside the update, under the
      // lock where there is one.
      const bool measured = t.probe && t.probe->due();
      const bool timed = t.delay_ns || t.slowdown > 1;  // the clock costs 20 ns an update
      const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      if (measured) t.probe->start();
      if (t.delay_ns) busy_until(t0 + std::chrono::nanoseconds(t.delay_ns * size));
      loss += model.train_batch(t.kind, b, *trained, lr);
      if (t.slowdown > 1)
        busy_until(t0 + std::chrono::duration_cast<std::chrono::nanoseconds>(
                            (std::chrono::steady_clock::now() - t0) * t.slowdown));
      if (t.probe) t.progress->samples.store(seen + size, std::memory_order_release);
      if (measured) t.probe->finish(nonzeros(b));
    }
    for (auto part = parts.rbegin(); part != parts.rend(); ++part) (*part)->leave_step();
    bool go_on = true;
    for (EpochPart* part : parts) go_on = go_on && part->after_step(b, lr, place());
    if (!go_on) break;  // the batch does not count: its update was not made
    seen += size;
    begin += size;
    if (shared) t.progress->samples.store(seen, std::memory_order_release);
    for (EpochPart* part : parts) go_on = go_on && part->after_batch(b, lr, place());
    if (!go_on) break;
    if (!settled) ask_parts();
    if ((k & 63) == 63) {
      if (shared) publish_record(*t.progress, seen, begin, loss);
      if (orphaned(t.parent)) break;
    }
  }
  const float lr = t.step_size.at_epoch_lr(epoch_lr, scheduled(seen) * t.workers);
  for (EpochPart* part : parts) part->end_epoch(lr, place(), begin >= end);
  model.end_epoch();
  if (t.progress) publish_record(*t.progress, seen, begin, loss);
  return loss;
}

}  // namespace hogwild::detail
