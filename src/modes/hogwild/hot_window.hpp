// Hot coordinates (TrainConfig::hot_k, --hot-k): the bias and the few features that
// most examples touch. Under plain Hogwild their cache lines bounce between cores on
// every example (two workers on SpamAssassin ran slower than one). With hot
// coordinates each worker trains its own copy of them and adds what it changed to
// the shared weights every hot_flush examples and at each epoch's end (HOGWILD++,
// DimmWitted), while every other weight stays shared and updated in place.
//
// The step does not know. The parent renumbers the hot features of the training
// rows (a copy of the index array) to coordinates just past the end of w that fall
// in a window of pages it maps private (MAP_PRIVATE, before forking, so each worker
// gets its own copy of them): `w + index` then lands in the worker's copy for a hot
// feature and in the shared weights for any other, with no test per non-zero. The
// window also holds the worker's copy of every other tensor (the bias); HotWindow
// gives the step that ParamSet and does the flushes.
//
// A crash loses the window's changes since its last flush, and a respawned worker
// retrains those rows (PrivateCopyPart); their updates to the features that are not
// hot had reached the shared weights as they were made, unbracketed, and are made
// again: at most hot_flush rows' worth (the Hogwild! race's own kind of error, on
// features those rows touch once each), where a replica loses none twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "data/degrees.hpp"
#include "hogwild/dataset.hpp"
#include "hogwild/model.hpp"
#include "hogwild/param_set.hpp"
#include "memory/robust_mutex.hpp"
#include "modes/hogwild/settled_shares.hpp"
#include "modes/hogwild/write_back_interval.hpp"
#include "trainer/epoch_part.hpp"

namespace hogwild {

// ConfigError unless `model` and `train` can have hot coordinates: a model that is
// Model::feature_indexed (the linear ones) and sparse rows. `option` names what asked
// ("--hot-k", "--layout hot").
void check_hot_coordinates(const Model& model, const Dataset& train, const char* option);

class HotWindow final : public detail::PrivateCopyPart {
 public:
  // shared: the live parameters; tensor 0 is indexed by feature (Model::feature_indexed).
  // hot[r]: the feature whose worker copy is window[r]; window[hot.size() ...] holds
  // the worker's copy of tensors 1, 2, ... in order (window_floats() in all). Loads the
  // copies from the shared weights (relaxed). A flush adds with fetch_add in every
  // mode: the window holds the coordinates that every worker changes between two
  // flushes, and two workers' relaxed load-and-store adds at once lose one's whole
  // window of changes (hot_flush examples' worth of the bias), not one update as a
  // Hogwild race does. (Two workers on a generated problem ended at test loss up to
  // 0.42 where serial ended at 0.32.) The other tensors' slots (the bias) add their
  // change divided by `writers`, the number of windows flushing into `shared`, as a
  // replica's bias does (replica.hpp: each window's bias settles between flushes, so
  // their changes are one correction; summed they overshoot. RCV1-like, --layout
  // hot, 14 runs of two workers: final test loss 0.4307-0.4483 summed,
  // 0.4305-0.4405 divided). flush_every: examples between flushes, or
  // WriteBackInterval::kAuto (a flush then costs about 5 % of the worker's time).
  // rows: the training rows with the hot features
  // renumbered into the window, which the steps read while they train it (rows());
  // null for a window trained by hand. lock: the mode's lock, held around each flush
  // in the step loop as around every other update (or null).
  // settled: the hot features that add a share of their change, as a replica's
  // do (settled_shares.hpp; the writer parts measure them from three workers on);
  // every other hot slot adds its whole change.
  HotWindow(const ParamSet& shared, std::vector<std::uint32_t> hot, float* window,
            std::size_t flush_every, unsigned writers, const Dataset* rows = nullptr,
            RobustMutex* lock = nullptr, detail::SettledShares settled = {});
  HotWindow(const HotWindow&) = delete;
  HotWindow& operator=(const HotWindow&) = delete;

  // Floats of the window for `hot` hot features of a model with these tensors.
  static std::size_t window_floats(const std::vector<TensorSpec>& specs, std::size_t hot);
  // What the step trains: tensor 0 the shared weights (a renumbered hot feature's
  // index reaches into the window), every other tensor the worker's copy.
  const ParamSet& params() const noexcept { return local_; }
  bool due(std::size_t examples) noexcept { return interval_.due(examples); }
  // Examples between flushes now (flush_every, or with WriteBackInterval::kAuto the
  // latest choice).
  std::size_t every() const noexcept { return interval_.every(); }
  // For every coordinate in the window: shared += copy - base (nothing written where
  // the copy did not change), then copy = base = shared.
  void flush() noexcept;
  std::uint64_t flushes() const noexcept { return flushes_; }
  void report(WorkerProgress& p) const override {
    p.flushes.store(flushes_, std::memory_order_relaxed);
    p.flush_every.store(interval_.every(), std::memory_order_relaxed);
  }

  // Its part of the step loop: the steps train the window, flushed every
  // flush_every examples and at the epoch's end, the place published then
  // (PrivateCopyPart), under the mode's lock where it has one.
  const ParamSet* trained() const noexcept override { return &params(); }
  const Dataset* rows() const noexcept override { return rows_; }

 protected:
  bool copy_due(std::size_t examples) override { return due(examples); }
  void write_back() override { locked_flush(); }

 private:
  ParamSet shared_, local_;
  std::vector<float*> targets_;  // the shared coordinate of each window slot
  std::size_t hot_;              // slots [0, hot_) are the hot features', the rest the bias's
  float share_;                  // of a bias slot's change a flush adds: 1 / writers
  detail::SettledShares settled_;
  std::vector<std::int32_t> slot_settled_;  // by hot slot: its place in settled_, or -1
  float* window_;
  const Dataset* rows_;
  std::vector<float> base_;
  detail::WriteBackInterval interval_;
  std::uint64_t flushes_ = 0;
  RobustMutex* lock_;

  void locked_flush() {
    if (!lock_) return flush();
    RobustLock guard(*lock_);
    flush();
  }
};

}  // namespace hogwild
