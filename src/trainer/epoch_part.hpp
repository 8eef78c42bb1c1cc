// What a mode, or an option of one, does around the model's steps in a worker's
// step loop (trainer/step_loop.hpp): the loop's one seam. The loop calls the parts
// it is given, in their order, before, between and after the mini-batches; it never
// asks which they are. A plain hogwild run has none.
//
// The parts are the worker's mode's (ModeDef::make_parts): ddp's gradient sync,
// modes/ddp/; dp's threads, modes/dp/; ps's replica, modes/ps/; striped's stripes;
// and, in the modes whose workers write the shared weights as they go, hogwild's
// options (modes/hogwild/writer_parts.hpp): the replica, the hot window and the
// node sync.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/communicator.hpp"
#include "hogwild/batch.hpp"
#include "hogwild/model.hpp"
#include "hogwild/param_set.hpp"
#include "trainer/progress.hpp"

namespace hogwild::detail {

// The worker's place in its epoch as the loop advances it, and the brackets of its
// progress record (trainer/progress.hpp) that a part writing the shared weights from
// a private copy puts around that write.
struct EpochPlace {
  WorkerProgress* progress = nullptr;               // null: serial, nothing published
  const std::atomic<std::int32_t>* stop = nullptr;  // the run's stop flag
  const std::atomic<std::int32_t>* terminated = nullptr;  // this worker got SIGTERM
  std::uint64_t seen = 0;    // examples trained, this epoch's and the earlier ones'
  std::size_t position = 0;  // rows of this epoch's order done
  double loss = 0;           // their summed loss

  // The run was stopped, or this worker got SIGTERM: the epoch ends after its batch.
  bool interrupted() const noexcept {
    return (stop && stop->load(std::memory_order_relaxed)) ||
           (terminated && terminated->load(std::memory_order_relaxed));
  }
  // Before a write of the updates of `seen` examples to the shared weights.
  void open() const noexcept {
    if (progress) begin_writes(*progress, seen);
  }
  // After it: what a respawned worker resumes from.
  void publish() const noexcept {
    if (progress) publish_record(*progress, seen, position, loss);
  }
  // Runs a collective; false when the run stopped (or this worker got SIGTERM)
  // while it waited for the others, which is then how the epoch ends here too. Any
  // other failure (a dead peer, the timeout) propagates: the worker fails.
  template <class F>
  bool collective(F&& f) const {
    try {
      f();
      return true;
    } catch (const CommError&) {
      if (interrupted()) return false;
      throw;
    }
  }
};

class EpochPart {
 public:
  virtual ~EpochPart() = default;
  // What the model's steps train instead of the shared weights (a private copy, or
  // the shared weights with this worker's gradient buffers); null: the shared ones.
  // At most one part of a loop has one.
  virtual const ParamSet* trained() const noexcept { return nullptr; }
  // The rows the steps read instead of the task's (the hot window's copy, its hot
  // features renumbered into the window); null: the task's. At most one part of a
  // loop has them, the one whose trained() reaches where they point.
  virtual const Dataset* rows() const noexcept { return nullptr; }
  // The steps write a private copy that this part writes to the shared weights (and
  // publishes the place when it does): the loop then brackets no step.
  virtual bool writes_later() const noexcept { return false; }
  // False while what trained() and writes_later() answer may change after a batch
  // (--layout auto's probe): the loop then asks again after every batch.
  virtual bool settled() const noexcept { return true; }
  // Nothing more to do in this run (a probe that chose plain): the loop stops
  // calling it, from the next batch on.
  virtual bool idle() const noexcept { return false; }
  // The model's step is this part's (dp: split among threads); at most one part.
  virtual bool takes_steps() const noexcept { return false; }
  virtual double train_batch(StepKind, const Batch&, float /*lr*/) { return 0; }
  // After the model's begin_epoch (rows: this worker's, in the epoch's order; start:
  // the position a respawned worker resumes at, else 0).
  virtual void begin_epoch(std::span<const std::uint32_t> /*rows*/, std::size_t /*start*/) {}
  // Around the model's step on `b`, in pairs: enter before it, leave after it
  // (striped: the stripes the batch touches taken, then given back).
  virtual void enter_step(const Batch& /*b*/) {}
  virtual void leave_step() {}
  // Right after the model's step on `b` at `lr`, before the batch counts (ddp: the
  // gradients combined with the other workers'). False: the run stopped while this
  // part waited for them; the epoch ends without the batch, whose update was not made.
  virtual bool after_step(const Batch& /*b*/, float /*lr*/, const EpochPlace& /*place*/) {
    return true;
  }
  // After each mini-batch `b` trained at `lr`, with `place` counting it. False: the
  // run stopped while this part waited for the other workers; the epoch ends.
  virtual bool after_batch(const Batch& /*b*/, float /*lr*/, const EpochPlace& /*place*/) {
    return true;
  }
  // The epoch's end, also one cut short (`whole` false): what is pending reaches the
  // shared weights. The loop publishes the place after every part's end.
  virtual void end_epoch(float /*lr*/, const EpochPlace& /*place*/, bool /*whole*/) {}
  // The worker's last act once it has trained every epoch (not after a stop or its
  // SIGTERM), at the step size `lr` it ended with (ps: the last push, after which
  // the servers stop waiting for this replica).
  virtual void finish(float /*lr*/) {}
  // Its counters into the worker's record as the worker ends (the replica's merges,
  // the node sync's syncs), for the result.
  virtual void report(WorkerProgress&) const {}
};

// A mode's part of the device path's epoch (--device cuda), in place of the plain
// launches that write each example's update to the shared device weights: ddp's
// gradient sync (modes/ddp/device_sync.hpp).
class DevicePart {
 public:
  virtual ~DevicePart() = default;
  // Rows a launch trains.
  virtual std::size_t chunk() const = 0;
  // Trains positions [begin, begin + count) of the epoch's order at `lr`, adding
  // their loss to `loss`. False: the run stopped while it waited for the others.
  virtual bool train(std::size_t begin, std::size_t count, float lr, const EpochPlace& place,
                     double& loss) = 0;
  // The epoch's end (whole: every row was trained).
  virtual void end_epoch(float lr, const EpochPlace& place, bool whole) = 0;
};

// A part whose steps train a private copy that it writes to the shared weights when
// due and at the epoch's end (a replica's merge, a hot window's flush), publishing
// the worker's place then: what a crash loses is the copy, and a respawned worker
// retrains exactly the rows whose updates were in it.
//
// Each epoch, and each range stolen from another worker's share, begins with a
// write-back that has nothing to add: the copy is reloaded from the shared weights.
// A worker that waited before it (an owner for the thief holding the end of its
// share, a thief for a share to take) would otherwise train from the weights as they
// were before the wait: its steps pull the stale copy toward where the others took
// the shared weights, and the write-back adds that pull on top of them, the others'
// updates of the wait counted twice. (Two workers on a generated problem with
// --layout hot ended at test loss 0.44 where static shares ended at 0.31.)
class PrivateCopyPart : public EpochPart {
 public:
  bool writes_later() const noexcept final { return true; }
  void begin_epoch(std::span<const std::uint32_t>, std::size_t) final { write_back(); }
  bool after_batch(const Batch& b, float, const EpochPlace& place) final {
    if (copy_due(b.size)) {
      place.open();
      write_back();
      place.publish();
    }
    return true;
  }
  void end_epoch(float, const EpochPlace& place, bool) final {  // also one cut short
    place.open();
    write_back();
  }

 protected:
  // Counts `examples` more trained on the copy; true when a write-back is due.
  virtual bool copy_due(std::size_t examples) = 0;
  virtual void write_back() = 0;
};

}  // namespace hogwild::detail
