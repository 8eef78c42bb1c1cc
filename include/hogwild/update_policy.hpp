// Access policies: how a step reads and writes the parameters it is given. A
// model's gradient step is written once against the update interface
// (optimizer.hpp: these reads plus the optimiser's descend operations) and compiled
// for every policy listed in HOGWILD_ACCESS_POLICIES below, so a model never knows
// which mode it runs under and a mode never knows which model it updates. A mode
// (mode.hpp, src/modes/) names the policy its steps run with; several modes may
// share one (the ddp, dp and ps modes all take GradientCapture, gradient.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "hogwild/sanitizers.hpp"

namespace hogwild {

namespace detail {

// ---------------------------------------------------------------------------------
// THE INTENDED RACE. Under hogwild (and lock, where the parent's evaluator reads
// while a worker writes) several processes read and write the same floats with no
// lock. Every such access below goes through std::atomic_ref<float> with
// memory_order_relaxed: each float is loaded and stored whole (no torn values, no
// undefined behaviour), but the load-add-store of one coordinate is NOT one atomic
// read-modify-write, so two workers updating the same coordinate at once may lose
// one of the two updates. That is exactly Hogwild!'s contract (Niu et al. 2011):
// sparse updates rarely collide and a lost update costs less than any
// synchronisation. Relaxed order is enough because no other data is published
// through these floats. On x86-64 a relaxed float load or store is one aligned
// 4-byte mov, but GCC 12 routes atomic_ref<float> through a general-purpose
// register (mov + movd each way), which cost up to 24% in bench_loop --relaxed
// (docs/PERFORMANCE.md). So on x86-64, outside sanitizer builds,
// relaxed_load/relaxed_store below are that one movss, written as inline asm that
// the compiler may neither split, merge nor elide: the access a relaxed atomic
// compiles to, without the detour. Sanitizer builds keep atomic_ref, so ASan and
// TSan still see every access.
//
// Dense blocks are the exception: per-element atomic_ref stops the vectoriser (6.6x
// slower on a dense softmax update), so dense_axpy/dense_dot below use explicit
// vector loads and stores of whole 16- or 32-byte lanes (GCC vector extensions; SSE
// or, on CPUs that have it, AVX2, picked at load time; vector accesses never tear
// at float granularity on x86-64), and a sparse row's margin gathers its weights
// (AVX2 vgatherqps: every lane one whole aligned float load). These are the places
// where shared floats are touched without atomic_ref; ThreadSanitizer is told so
// in tests/tsan.supp (sanitizer builds take the scalar relaxed_load path for the
// gather).
// ---------------------------------------------------------------------------------

#if defined(__x86_64__) && !defined(HOGWILD_ASAN) && !defined(HOGWILD_TSAN)
inline float relaxed_load(const float* p) noexcept {
  float v;
  asm volatile("movss %1, %0" : "=x"(v) : "m"(*p));
  return v;
}
inline void relaxed_store(float* p, float v) noexcept {
  asm volatile("movss %1, %0" : "=m"(*p) : "x"(v));
}
#else
inline float relaxed_load(const float* p) noexcept {
  return std::atomic_ref<float>(*const_cast<float*>(p)).load(std::memory_order_relaxed);
}
inline void relaxed_store(float* p, float v) noexcept {
  std::atomic_ref<float>(*p).store(v, std::memory_order_relaxed);
}
#endif

// One coordinate of a replica's merge or a hot window's flush: where the private
// copy changed since it was last loaded (copy != base), shared += copy - base, with
// one fetch_add under `atomic` (none lost) or a relaxed load and store (Hogwild's
// contract); then copy = base = shared, so the copy picks up the others' work. An
// unchanged coordinate is only read: no line stolen. (dense_merge_shared below is
// the vectorised form for long runs.)
inline void merge_coordinate(float* shared, float& copy, float& base, bool atomic) noexcept {
  const float d = copy - base;
  float v;
  if (d == 0)
    v = relaxed_load(shared);
  else if (atomic)
    v = std::atomic_ref<float>(*shared).fetch_add(d, std::memory_order_relaxed) + d;
  else
    relaxed_store(shared, v = relaxed_load(shared) + d);
  copy = base = v;
}

// merge_coordinate's atomic add of `share` of the change: a bias merged as the
// mean of its writers' changes. Each writer's copy of a bias settles between
// merges, so their changes are one correction repeated, and their sum overshoots
// (src/modes/hogwild/replica.hpp has the figures).
inline void merge_coordinate_share(float* shared, float& copy, float& base, float share) noexcept {
  const float d = (copy - base) * share;
  copy = base = d == 0 ? relaxed_load(shared)
                       : std::atomic_ref<float>(*shared).fetch_add(d, std::memory_order_relaxed) + d;
}

// v, where the compiler can no longer see how it was computed: an add of it is never
// fused into a multiply-add (GCC contracts a * b + c by default). The SGD write
// w + (-lr g) is then rounded as w + round(-lr g) whether the step adds it to w or
// the gradient path (gradient.hpp) stores round(-lr g) and adds it later: the two
// give the same bits.
inline float opaque(float v) noexcept {
#if defined(__x86_64__)
  asm("" : "+x"(v));
#else
  asm("" : "+g"(v));
#endif
  return v;
}

using v4f = float __attribute__((vector_size(16)));

inline v4f vload(const float* p) noexcept {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void vstore(float* p, v4f v) noexcept { std::memcpy(p, &v, sizeof v); }

// dst[i] += a * x[i] on shared dst, vectorised (see THE INTENDED RACE); each
// product is rounded before the add (no fused multiply-add; see opaque()).
__attribute__((noinline)) void dense_axpy_shared(float* dst, float a, const float* x,
                                                 std::size_t n) noexcept;
// sum w[i] * x[i] over shared w, vectorised.
__attribute__((noinline)) float dense_dot_shared(const float* w, const float* x,
                                                 std::size_t n) noexcept;
// out[r] = sum_i W[r * ld + i] * x[i] for r < rows, over shared W: one row of a
// dense layer's forward pass against several weight rows, x loaded once per block
// of rows instead of once per row. The byte form reads x[i] as x[i] / 255 (a
// dense_u8 row, dataset.hpp), to within rounding. Compiled for AVX-512, AVX2 and
// baseline x86-64 (src/kernels/dense_layer.cpp), chosen once at run time.
__attribute__((noinline)) void dense_multi_dot_shared(const float* W, std::size_t ld,
                                                      std::size_t rows, const float* x,
                                                      std::size_t n, float* out) noexcept;
__attribute__((noinline)) void dense_multi_dot_shared(const float* W, std::size_t ld,
                                                      std::size_t rows, const std::uint8_t* x,
                                                      std::size_t n, float* out) noexcept;
// W[r * ld + i] += sum_b coeff[b * cs + r] * xs[b][i] for r < rows, i < n, on shared
// W: a mini-batch's outer-product update (the dense gradient of a linear layer,
// scaled) in one pass over W, each lane loaded and stored once. Byte rows as above.
__attribute__((noinline)) void dense_outer_update_shared(float* W, std::size_t ld,
                                                         std::size_t rows, const float* coeff,
                                                         std::size_t cs,
                                                         const float* const* xs,
                                                         std::size_t count,
                                                         std::size_t n) noexcept;
__attribute__((noinline)) void dense_outer_update_shared(float* W, std::size_t ld,
                                                         std::size_t rows, const float* coeff,
                                                         std::size_t cs,
                                                         const std::uint8_t* const* xs,
                                                         std::size_t count,
                                                         std::size_t n) noexcept;
// A replica's merge (replica.hpp) of [0, n): where copy[i] != base[i], shared[i] +=
// copy[i] - base[i]; then copy[i] = base[i] = shared[i]. Vectorised: a block of
// lanes that the replica did not change at all is only read; a block with any
// change is stored whole, its unchanged lanes with the value just read (an add by
// another worker to one of those in that instant may be lost, as a Hogwild update
// may be).
__attribute__((noinline)) void dense_merge_shared(float* shared, float* copy, float* base,
                                                  std::size_t n) noexcept;
// sum w[index[k]] * value[k] over shared w: a sparse row's margin. On CPUs with
// AVX2 (or AVX-512) the weights are fetched with gather instructions, whose every
// lane is one whole aligned float load, so the race is the same as relaxed_load's;
// elsewhere, and under sanitizers, one relaxed_load per non-zero.
float sparse_dot_shared(const float* w, const std::uint32_t* index, const float* value,
                        std::uint32_t nnz) noexcept;

}  // namespace detail

// How every mode reads a block of weights: the vector kernels above, whose loads are
// whole floats (on memory nobody else touches, under serial). Dense writes too,
// except where a mode says otherwise (atomic).
struct VectorReads {
  static float sparse_dot(const float* w, const std::uint32_t* index, const float* value,
                          std::uint32_t nnz) noexcept {
    return detail::sparse_dot_shared(w, index, value, nnz);
  }
  static float dot(const float* w, const float* x, std::size_t n) noexcept {
    return detail::dense_dot_shared(w, x, n);
  }
  static void axpy(float* dst, float a, const float* x, std::size_t n) noexcept {
    detail::dense_axpy_shared(dst, a, x, n);
  }
};

// What a policy tells the update interface (optimizer.hpp) about the memory its
// step touches:
//   concurrent_writers  other processes write these floats while the step reads
//                       them: a dense read goes through whole-float or whole-lane
//                       loads (a "live" operand of the kernels)
//   shared_memory       other processes may read these floats while the step
//                       writes them (at least the parent's evaluator): dense writes
//                       are whole floats or lanes
//   plain_adds          a write is a plain load, add and store, so a kernel may add
//                       a whole gradient block into the weights in its own loop
//                       (the fused SGD paths of the dense models)
// A tensor private to one worker (ParamSet::exclusive, its replica) is neither
// written nor read by anyone else, whatever the policy says.

// Serial: one process owns the parameters; plain loads and stores.
struct SerialUpdate : VectorReads {
  static constexpr bool concurrent_writers = false;
  static constexpr bool shared_memory = false;
  static constexpr bool plain_adds = true;
  static float read(const float* p) noexcept { return *p; }
  static void add(float* p, float d) noexcept { *p += d; }
};

// Hogwild!: no lock; the intended race described above.
struct HogwildUpdate : VectorReads {
  static constexpr bool concurrent_writers = true;
  static constexpr bool shared_memory = true;
  static constexpr bool plain_adds = true;
  static float read(const float* p) noexcept { return detail::relaxed_load(p); }
  static void add(float* p, float d) noexcept {
    detail::relaxed_store(p, detail::relaxed_load(p) + d);
  }
};

// Atomic: every coordinate's update is one atomic read-modify-write (no update is
// ever lost); reads are relaxed. Dense blocks pay per-element CAS loops: that cost
// is what this mode exists to show.
struct AtomicUpdate : VectorReads {
  static constexpr bool concurrent_writers = true;
  static constexpr bool shared_memory = true;
  static constexpr bool plain_adds = false;
  static float read(const float* p) noexcept { return detail::relaxed_load(p); }
  static void add(float* p, float d) noexcept {
    std::atomic_ref<float>(*p).fetch_add(d, std::memory_order_relaxed);
  }
  static void axpy(float* dst, float a, const float* x, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) add(dst + i, a * x[i]);
  }
};

// Lock: the trainer holds one robust interprocess mutex around the read, gradient
// and update of each mini-batch ("locking updates", src/modes/lock/mode.cpp). Inside the
// lock no other worker writes, so dense reads are plain; the parent's evaluator may
// read, so writes stay those of hogwild.
struct LockUpdate : HogwildUpdate {
  static constexpr bool concurrent_writers = false;
};

namespace detail {
// --conflicts: one coordinate's write, out of line in the library (the instrument's
// sample and counters are its own; src/science/conflicts.cpp).
void measured_add(float* p, float d) noexcept;
}  // namespace detail

// --conflicts: hogwild's (or under a lock, serial's) non-atomic read-modify-write,
// or atomic mode's fetch_add, for every coordinate one at a time (no vector path:
// every write is seen), and for a sampled coordinate a compare-and-swap that
// detects a write landing inside its read-modify-write and adds its intended
// change to the worker's private sum (src/science/conflicts.cpp).
struct MeasuredUpdate : VectorReads {
  static constexpr bool concurrent_writers = true;
  static constexpr bool shared_memory = true;
  static constexpr bool plain_adds = false;
  static float read(const float* p) noexcept { return detail::relaxed_load(p); }
  static void add(float* p, float d) noexcept { detail::measured_add(p, d); }
  static void axpy(float* dst, float a, const float* x, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) add(dst + i, a * x[i]);
  }
};

namespace detail {
// --mode simulated (src/modes/simulated/): one write of a simulated update, logged
// as the step makes it so that the simulator can take it back and make it again
// when the simulated clock says the write lands.
struct SimulatedWrite {
  float* p;
  float old;  // the value before this write
  float d;    // the change
};
// The log of the step being simulated, set around each step by the simulator (one
// process, one thread). Its room starts at the model's every coordinate twice over
// (untouched pages cost nothing); a step that writes more (a mini-batch writes each
// row's coordinates) has `grow` double it, and where memory for that runs out it
// sets `overflow` and the simulator stops the run with a ResourceError (its undo
// would be incomplete).
struct SimulatedLog {
  SimulatedWrite* writes = nullptr;
  std::size_t size = 0, capacity = 0;
  bool overflow = false;
  bool (*grow)(SimulatedLog&) noexcept = nullptr;  // false: no memory for more room
  void* owner = nullptr;                           // grow's
};
inline thread_local SimulatedLog* simulated_log = nullptr;
}  // namespace detail

// --mode simulated: the step runs as serial's, reading and writing the weights in
// place (every read sees what the simulated schedule has committed, and the
// step's own earlier writes), and every write is logged: one coordinate at a time
// (no fused block adds), each product rounded before its add as serial's vector
// kernels round it. The simulator then undoes the writes and makes each again at
// the simulated time it lands (src/modes/simulated/simulator.hpp).
struct SimulatedUpdate : VectorReads {
  static constexpr bool concurrent_writers = false;
  static constexpr bool shared_memory = false;
  static constexpr bool plain_adds = false;
  static float read(const float* p) noexcept { return *p; }
  static void add(float* p, float d) noexcept {
    detail::SimulatedLog& log = *detail::simulated_log;
    if (log.size < log.capacity || (log.grow && log.grow(log)))
      log.writes[log.size++] = {p, *p, d};
    else
      log.overflow = true;
    *p += d;
  }
  static void axpy(float* dst, float a, const float* x, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) add(dst + i, detail::opaque(a * x[i]));
  }
};

// The access policies every model's step is compiled for, in one list: X(policy,
// arg) per entry. A mode that needs a new policy adds it here (GradientCapture, the
// gradient path, is defined in gradient.hpp).
#define HOGWILD_ACCESS_POLICIES(X, arg) \
  X(SerialUpdate, arg)                  \
  X(HogwildUpdate, arg)                 \
  X(AtomicUpdate, arg)                  \
  X(LockUpdate, arg)                    \
  X(GradientCapture, arg)               \
  X(MeasuredUpdate, arg)                \
  X(SimulatedUpdate, arg)

}  // namespace hogwild
