// ModelBase<Derived> turns a model's one templated gradient step into every update
// mode. A model writes
//
//   template <class U> double step(const Batch& b, const ParamSet& p, float lr);
//   void predict(const ParamSet& p, RowView x, float target, double& loss, bool& correct) const;
//
// where U is the update policy (update_policy.hpp: U::read, U::add, U::dot, U::axpy)
// and `step` returns the batch's summed loss. The loop below — batches, step size,
// the lock of lock mode, progress counters, the stop flag — is instantiated once per
// mode, so there is no virtual call or allocation per example.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <span>

#include "hogwild/model.hpp"
#include "hogwild/robust_mutex.hpp"

namespace hogwild {

// Step size: lr0 * decay^epoch / (1 + t / inverse_scale), t = examples seen by all
// workers so far (estimated as this worker's count times the number of workers).
struct StepSize {
  float lr0 = 0.1f;
  float decay = 1.0f;          // per-epoch backoff (Hogwild! paper: 0.9)
  double inverse_scale = 0.0;  // 0: no inverse-time decay
  float at(unsigned epoch, std::uint64_t t) const noexcept {
    double lr = lr0 * std::pow(static_cast<double>(decay), epoch);
    if (inverse_scale > 0) lr /= 1.0 + static_cast<double>(t) / inverse_scale;
    return static_cast<float>(lr);
  }
};

// Per-worker counters, each on its own cache lines (no false sharing between
// workers). Written by the worker with relaxed stores, read by the parent, and read
// back by a restarted worker (or a resumed run) to continue where this one stopped:
// `epoch`, `position` and `loss` are published together every 64 mini-batches and
// at the end of the epoch's loop.
struct alignas(128) WorkerProgress {
  std::atomic<std::uint64_t> samples{0};      // examples processed, all epochs
  std::atomic<std::uint32_t> epochs_done{0};  // release: epoch loss is published
  std::atomic<std::int32_t> pid{0};
  std::atomic<std::uint32_t> epoch{0};        // the epoch `position` refers to
  std::atomic<std::uint64_t> position{0};     // rows of that epoch's order done
  std::atomic<double> loss{0};                // summed loss of those rows
  std::atomic<std::uint64_t> pss_bytes{0};    // proportional set size at exit
  std::atomic<std::int64_t> finish_ns{0};     // steady clock when the worker finished
};

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
  ParamSet params;
  WorkerProgress* progress = nullptr;            // may be null (serial)
  RobustMutex* mutex = nullptr;                  // lock mode only
  const std::atomic<std::int32_t>* stop = nullptr;  // set by the parent to stop early
  std::int32_t parent = 0;  // a worker's parent pid: the loop ends when it is gone
};

namespace detail {
// True when `parent` is non-zero and no longer this process's parent: a worker
// whose parent died stops within 64 mini-batches even if PR_SET_PDEATHSIG missed.
bool orphaned(std::int32_t parent) noexcept;
}  // namespace detail

template <class Derived>
class ModelBase : public Model {
 public:
  double train_epoch(Mode mode, const EpochTask& task) final {
    switch (mode) {
      case Mode::serial: return run<SerialUpdate>(task);
      case Mode::hogwild: return run<HogwildUpdate>(task);
      case Mode::atomic: return run<AtomicUpdate>(task);
      case Mode::lock: return run<LockUpdate>(task);
    }
    return 0;
  }

  Evaluation evaluate(const ParamSet& params, const Dataset& data,
                      const float* targets) const override {
    Evaluation e;
    e.rows = data.rows();
    if (data.rows() == 0) return e;
    double loss = 0;
    std::size_t correct = 0;
    for (std::size_t r = 0; r < data.rows(); ++r) {
      double l = 0;
      bool ok = false;
      derived().predict(params, data.row(r), targets[r], l, ok);
      loss += l;
      correct += ok;
    }
    const double n = static_cast<double>(data.rows());
    e.loss = loss / n;
    if (derived().reports_accuracy())
      e.accuracy = static_cast<double>(correct) / n;
    else
      e.rmse = std::sqrt(2.0 * e.loss);  // regression loss is (z - y)^2 / 2
    return e;
  }

  // Classification models report accuracy; regression ones RMSE.
  bool reports_accuracy() const { return true; }

 private:
  Derived& derived() { return static_cast<Derived&>(*this); }
  const Derived& derived() const { return static_cast<const Derived&>(*this); }

  template <class U>
  double run(const EpochTask& t) {
    double loss = t.start_loss;
    const std::size_t n = t.rows.size();
    const std::size_t batch = t.batch ? t.batch : 1;
    std::uint64_t seen = t.progress ? t.progress->samples.load(std::memory_order_relaxed) : 0;
    std::size_t begin = std::min(t.start, n);
    for (std::size_t k = 0; begin < n; ++k) {
      if (t.stop && t.stop->load(std::memory_order_relaxed)) break;
      const std::size_t size = std::min(batch, n - begin);
      const Batch b{t.data, t.targets, t.rows.data() + begin, size};
      const float lr = t.step_size.at(t.epoch, seen * t.workers);
      if constexpr (U::locks_batches) {
        RobustLock guard(*t.mutex);
        loss += derived().template step<U>(b, t.params, lr);
      } else {
        loss += derived().template step<U>(b, t.params, lr);
      }
      seen += size;
      begin += size;
      if ((k & 63) == 63) {
        if (t.progress) publish(*t.progress, seen, begin, loss);
        if (detail::orphaned(t.parent)) break;
      }
    }
    if (t.progress) publish(*t.progress, seen, begin, loss);
    return loss;
  }

  static void publish(WorkerProgress& p, std::uint64_t seen, std::size_t position, double loss) {
    p.loss.store(loss, std::memory_order_relaxed);
    p.samples.store(seen, std::memory_order_relaxed);
    p.position.store(position, std::memory_order_relaxed);
  }
};

// Row kernels shared by the linear models: one branch per row on dense vs sparse.
template <class U>
inline float row_dot(const float* w, RowView x) noexcept {
  if (x.dense()) return U::dot(w, x.value, x.nnz);
  float s = 0;
  for (std::uint32_t k = 0; k < x.nnz; ++k) s += U::read(w + x.index[k]) * x.value[k];
  return s;
}

template <class U>
inline void row_axpy(float* w, float a, RowView x) noexcept {
  if (x.dense()) return U::axpy(w, a, x.value, x.nnz);
  for (std::uint32_t k = 0; k < x.nnz; ++k) U::add(w + x.index[k], a * x.value[k]);
}

// w_j += a * x_j - shrink * w_j on the coordinates x touches: the "lazy" L2 step of
// sparse SGD (the penalty is applied where the example has features).
template <class U>
inline void row_axpy_l2(float* w, float a, float shrink, RowView x) noexcept {
  if (x.dense()) {
    if (shrink != 0) U::axpy(w, -shrink, w, x.nnz);
    return U::axpy(w, a, x.value, x.nnz);
  }
  for (std::uint32_t k = 0; k < x.nnz; ++k) {
    float* p = w + x.index[k];
    U::add(p, a * x.value[k] - shrink * U::read(p));
  }
}

}  // namespace hogwild
