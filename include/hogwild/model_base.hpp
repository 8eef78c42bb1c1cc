// ModelBase<Derived> turns a model's one templated gradient step into every update
// mode. A model writes
//
//   template <class U> double step(const Batch& b, const ParamSet& p, float lr);
//   void predict(const ParamSet& p, RowView x, float target, double& loss, bool& correct) const;
//
// where U = Update<mode, optimizer> (optimizer.hpp): U::read, U::dot for reading
// the shared weights, U::descend / U::descend_axpy for applying a gradient (and
// raw U::add, U::axpy for writes that are not gradients); `step` returns the
// batch's summed loss. The loop below — batches, step size,
// the lock of lock mode, progress counters, the stop flag — is instantiated once per
// mode, so there is no virtual call or allocation per example.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <span>

#include "hogwild/error.hpp"
#include "hogwild/model.hpp"
#include "hogwild/optimizer.hpp"
#include "hogwild/models/hot_coordinates.hpp"
#include "hogwild/replica.hpp"
#include "hogwild/robust_mutex.hpp"

namespace hogwild {

// Step size: lr0 * decay^epoch / (1 + t / inverse_scale), t = examples seen by all
// workers so far (estimated as this worker's count times the number of workers).
struct StepSize {
  float lr0 = 0.1f;
  float decay = 1.0f;          // per-epoch backoff (Hogwild! paper: 0.9)
  double inverse_scale = 0.0;  // 0: no inverse-time decay
  float at(unsigned epoch, std::uint64_t t) const noexcept {
    return at_epoch_lr(epoch_start(epoch), t);
  }
  // lr0 * decay^epoch: the pow() is paid once per epoch, not once per mini-batch.
  double epoch_start(unsigned epoch) const noexcept {
    return lr0 * std::pow(static_cast<double>(decay), epoch);
  }
  // at() from epoch_start(epoch) computed beforehand.
  float at_epoch_lr(double epoch_lr, std::uint64_t t) const noexcept {
    if (inverse_scale > 0) epoch_lr /= 1.0 + static_cast<double>(t) / inverse_scale;
    return static_cast<float>(epoch_lr);
  }
};

// Per-worker counters, each on its own cache lines (no false sharing between
// workers). Written by the worker with relaxed stores, read by the parent, and read
// back by a restarted worker (or a resumed run) to continue where this one stopped:
// `epoch`, `position` and `loss` are published together every 64 mini-batches (at
// each merge or flush instead when the worker trains a replica or hot coordinates,
// whose unmerged changes a crash loses) and at the end of the epoch's loop.
// `begun` and `samples` bracket every write to the shared weights (each mini-batch's
// step; a replica's merge, a hot window's flush): begun is raised before the writes,
// samples after (release), so a copy of the weights holds the updates of between
// sum(samples) read before it (acquire) and sum(begun) read after it (after an
// acquire fence): what an evaluation's metrics line says it scored (Run::capture).
struct alignas(128) WorkerProgress {
  std::atomic<std::uint64_t> samples{0};      // examples whose updates are in the weights
  std::atomic<std::uint64_t> begun{0};        // ... and those whose writes have begun
  std::atomic<std::uint32_t> epochs_done{0};  // release: epoch loss is published
  std::atomic<std::int32_t> pid{0};
  std::atomic<std::uint32_t> epoch{0};        // the epoch `position` refers to
  std::atomic<std::uint64_t> position{0};     // rows of that epoch's order done
  std::atomic<double> loss{0};                // summed loss of those rows
  std::atomic<std::uint64_t> pss_bytes{0};    // proportional set size at exit
  std::atomic<std::int64_t> finish_ns{0};     // steady clock when the worker finished
  std::atomic<std::uint64_t> private_bytes{0};  // pages only this worker maps, at exit
  std::atomic<std::uint64_t> merges{0};       // its replica's merges, at exit
  std::atomic<std::uint64_t> merge_every{0};  // its replica's F at exit (--merge-every auto)
  std::atomic<std::uint32_t> counted{0};      // epochs whose finish it added to the count
  std::atomic<std::uint32_t> seq{0};          // seqlock over epoch, position, loss, epochs_done
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
  Optimizer optimizer = Optimizer::sgd;  // params' tensors carry state when it has some
  ParamSet params;
  WorkerProgress* progress = nullptr;            // may be null (serial)
  RobustMutex* mutex = nullptr;                  // lock mode only
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
};

// Starts loading row r while the current example computes: workers visit their
// rows in shuffled order, so every row is a cache miss no hardware prefetcher can
// predict. For a sparse row the first 16 non-zeros (index and value) are asked
// for, and the adjacent-line and stream prefetchers follow the rest; a dense row
// (an image: 784 floats, 49 lines; as bytes, 13) is asked for whole, up to 8 KiB: waiting for its
// lines was 70 % of softmax's forward pass.
// prefetcht0 as volatile asm on x86-64: GCC 12 deleted every __builtin_prefetch
// here once inlined (the library's binary had no prefetch instruction at all).
inline void prefetch(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}
// Row r's entry of a sparse or ratings dataset's offsets (500k rows: 4 MB, visited
// in shuffled order): prefetch_row reads it to find the row, so it is asked for one
// batch before that.
inline void prefetch_offsets(const Dataset& d, std::uint32_t r) noexcept {
  const auto off = d.offsets();
  if (!off.empty()) prefetch(off.data() + r);
}
inline void prefetch_row(const Dataset& d, std::uint32_t r) noexcept {
  const RowView x = d.row(r);
  if (x.index) {
    prefetch(x.index);
    prefetch(x.value);
    return;
  }
  const char* p = x.bytes ? reinterpret_cast<const char*>(x.bytes)
                          : reinterpret_cast<const char*>(x.value);
  const std::size_t bytes = std::min<std::size_t>(x.nnz * (x.bytes ? 1 : sizeof(float)), 8192);
  for (std::size_t o = 0; o < bytes; o += 64) prefetch(p + o);
}
namespace detail {
// std::atomic_thread_fence, but a compiler barrier under ThreadSanitizer: it does
// not model fences (GCC refuses them with -fsanitize=thread), and every access
// these fences order is atomic, so it has no race to report either way.
inline void fence(std::memory_order order) noexcept {
#if defined(__SANITIZE_THREAD__)
  std::atomic_signal_fence(order);
#else
  std::atomic_thread_fence(order);
#endif
}

// True when `parent` is non-zero and no longer this process's parent: a worker
// whose parent died stops within 64 mini-batches even if PR_SET_PDEATHSIG missed.
bool orphaned(std::int32_t parent) noexcept;

// The writer's half of WorkerProgress's seqlock (its one writer is the worker):
// `seq` is odd while epoch, position, loss or epochs_done change, so a reader
// (the parent's checkpoint) takes them only from one publication.
inline void record_write_begin(WorkerProgress& p) noexcept {
  p.seq.store(p.seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  fence(std::memory_order_release);  // odd before the fields change
}
inline void record_write_end(WorkerProgress& p) noexcept {
  p.seq.store(p.seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}
// Before writes to the shared weights that bring them to `seen` examples (a
// batch's step, a replica's merge, a hot window's flush): the fence orders the
// store of begun before every later store (the writes).
inline void begin_writes(WorkerProgress& p, std::uint64_t seen) noexcept {
  p.begun.store(seen, std::memory_order_relaxed);
  fence(std::memory_order_release);
}
// The worker's place: `position` rows of its epoch done, their summed `loss`, and
// `seen` examples whose updates are in the shared weights.
inline void publish_record(WorkerProgress& p, std::uint64_t seen, std::size_t position,
                           double loss) noexcept {
  record_write_begin(p);
  p.loss.store(loss, std::memory_order_relaxed);
  p.position.store(position, std::memory_order_relaxed);
  record_write_end(p);
  p.samples.store(seen, std::memory_order_release);  // also stored every batch, outside
}
}  // namespace detail

template <class Derived>
class ModelBase : public Model {
 public:
  double train_epoch(Mode mode, const EpochTask& task) final {
    check_storage(*task.data);
    return dispatch_update(mode, task.optimizer, [&]<class U>() { return run<U>(task); });
  }

  Evaluation evaluate(const ParamSet& params, const Dataset& data,
                      const float* targets) const override {
    check_storage(data);
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

  // Per-worker hooks around each epoch's batches, called in the worker process (so
  // a model's members are private to it there). A model that keeps worker-private
  // state (per-worker buffers) defines its own, found by name like `step`.
  // end_epoch runs before the epoch is published, also when it was cut short.
  template <class U>
  void begin_epoch(const EpochTask&) {}
  template <class U>
  void end_epoch(const EpochTask&) {}

 private:
  // Byte rows (dense_u8) only for a model that reads them: the others would read
  // RowView::value, which such rows leave null.
  void check_storage(const Dataset& data) const {
    if (data.layout() == Layout::dense_u8 && !this->reads_byte_rows())
      throw ConfigError("model " + this->name() + " reads float rows, and " + data.source() +
                        " holds bytes (dense-u8): pass Dataset::widened() (the trainer "
                        "does this itself)");
  }
  Derived& derived() { return static_cast<Derived&>(*this); }
  const Derived& derived() const { return static_cast<const Derived&>(*this); }

  template <class U>
  double run(const EpochTask& t) {
    double loss = t.start_loss;
    const std::size_t n = t.rows.size();
    const std::size_t batch = t.batch ? t.batch : 1;
    std::uint64_t seen = t.progress ? t.progress->samples.load(std::memory_order_relaxed) : 0;
    const double epoch_lr = t.step_size.epoch_start(t.epoch);
    derived().template begin_epoch<U>(t);
    const ParamSet& trained = t.replica ? t.replica->params() : t.hot ? t.hot->params() : t.params;
    std::size_t begin = std::min(t.start, n);  // a restarted worker resumes mid-epoch
    for (std::size_t k = 0; begin < n; ++k) {
      if (t.stop && t.stop->load(std::memory_order_relaxed)) break;
      if (t.terminated && t.terminated->load(std::memory_order_relaxed)) break;
      const std::size_t size = std::min(batch, n - begin);
      const Batch b{t.data, t.targets, t.rows.data() + begin, size};
      // A pipeline over the next rows: offsets, then the row's data, then (for a
      // model whose rows name scattered parameter rows, like MF's two factor rows)
      // the parameters it will touch, each stage one batch after the one it needs.
      constexpr bool params = requires(const Derived& d, RowView x) {
        d.prefetch_params(t.params, x);
      };
      // (The offsets stage measured 9 % slower for the linear model on RCV1-like,
      // whose step starts on the row right away; MF gained 53 % with it.)
      const std::size_t ahead = params ? 2 : 1;  // how far ahead the row's data is
      if (params && begin + (ahead + 1) * size < n)
        prefetch_offsets(*t.data, t.rows[begin + (ahead + 1) * size]);
      if (begin + ahead * size < n) prefetch_row(*t.data, t.rows[begin + ahead * size]);
      if (batch > 1 && begin + ahead * size + 1 < n)
        prefetch_row(*t.data, t.rows[begin + ahead * size + 1]);
      if constexpr (params)
        if (begin + size < n) derived().prefetch_params(trained, t.data->row(t.rows[begin + size]));
      const float lr = t.step_size.at_epoch_lr(epoch_lr, seen * t.workers);
      // Straight to the shared weights: the step's writes are bracketed (see
      // WorkerProgress); a private replica or window is bracketed at its merge.
      const bool shared = t.progress && !t.replica && !t.hot;
      if (shared) detail::begin_writes(*t.progress, seen + size);
      if constexpr (U::locks_batches) {
        RobustLock guard(*t.mutex);
        loss += derived().template step<U>(b, trained, lr);
      } else {
        loss += derived().template step<U>(b, trained, lr);
      }
      seen += size;
      begin += size;
      if (shared) t.progress->samples.store(seen, std::memory_order_release);
      // With a replica or hot coordinates, the position is published only once its
      // rows are merged or flushed: what a crash loses is the private copy, and a
      // respawned worker then retrains exactly the rows whose updates were in it.
      if (t.replica && t.replica->due(size)) {
        if (t.progress) detail::begin_writes(*t.progress, seen);
        t.replica->merge();
        if (t.progress) detail::publish_record(*t.progress, seen, begin, loss);
      }
      if (t.hot && t.hot->due(size)) {
        if (t.progress) detail::begin_writes(*t.progress, seen);
        flush_hot<U>(t);
        if (t.progress) detail::publish_record(*t.progress, seen, begin, loss);
      }
      if ((k & 63) == 63) {
        if (t.progress && !t.replica && !t.hot)
          detail::publish_record(*t.progress, seen, begin, loss);
        if (detail::orphaned(t.parent)) break;
      }
    }
    if ((t.replica || t.hot) && t.progress) detail::begin_writes(*t.progress, seen);
    if (t.replica) t.replica->merge();  // also when the epoch was cut short
    if (t.hot) flush_hot<U>(t);
    derived().template end_epoch<U>(t);
    if (t.progress) detail::publish_record(*t.progress, seen, begin, loss);
    return loss;
  }

  // Under lock a flush holds the lock, as every other update does.
  template <class U>
  static void flush_hot(const EpochTask& t) {
    if constexpr (U::locks_batches) {
      RobustLock guard(*t.mutex);
      t.hot->flush();
    } else {
      t.hot->flush();
    }
  }

};

// Row kernels shared by the linear models: one branch per row on dense vs sparse.
template <class U>
inline float row_dot(const float* w, RowView x) noexcept {
  if (x.dense()) return U::dot(w, x.value, x.nnz);
  return U::sparse_dot(w, x.index, x.value, x.nnz);
}

// Applies the gradient a * x (+ l2 * w on the coordinates x touches: the "lazy" L2
// of sparse SGD) to the block of tensor w starting at `offset`, through the
// optimiser. Dense rows apply the penalty's gradient as its own descend step.
template <class U>
inline void row_descend(const ParamSet::Tensor& w, std::size_t offset, float a, float l2,
                        RowView x, float lr) noexcept {
  if (x.dense()) {
    if (l2 != 0) U::descend_axpy(w, offset, l2, w.data + offset, x.nnz, lr);
    return U::descend_axpy(w, offset, a, x.value, x.nnz, lr);
  }
  const float* base = w.data + offset;
  if constexpr (U::optimizer == Optimizer::sgd) {
    // Sgd::descend is w -= lr * g; spelled out here on a local pointer, because
    // through descend(w, ...) the compiler reloads w.data after every relaxed store.
    float* d = w.data + offset;
    for (std::uint32_t k = 0; k < x.nnz; ++k) {
      const float g = a * x.value[k];
      U::add(d + x.index[k], -lr * (l2 != 0 ? g + l2 * U::read(d + x.index[k]) : g));
    }
    return;
  }
  for (std::uint32_t k = 0; k < x.nnz; ++k) {
    const std::size_t j = offset + x.index[k];
    const float g = a * x.value[k];
    U::descend(w, j, l2 != 0 ? g + l2 * U::read(base + x.index[k]) : g, lr);
  }
}

}  // namespace hogwild
