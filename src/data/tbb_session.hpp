// Scoped use of TBB that leaves no worker thread behind. The trainer forks worker
// processes after loading data, and a fork taken while TBB's threads exist copies a
// half-alive scheduler into the child. Every parallel section in the data layer runs
// inside a TbbSession, whose destructor joins TBB's threads (oneapi::tbb::finalize).
#pragma once

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <new>
#include <utility>

#include "hogwild/sanitizers.hpp"

#ifdef HOGWILD_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace hogwild::detail {

class TbbSession {
 public:
  // threads == 0: as many as TBB sees cores.
  explicit TbbSession(unsigned threads)
      : arena_(threads == 0 ? oneapi::tbb::task_arena::automatic : static_cast<int>(threads)) {}
  TbbSession(const TbbSession&) = delete;
  TbbSession& operator=(const TbbSession&) = delete;

  // finalize waits for the workers to exit. It reports failure (nothrow) only when
  // someone else in the process still uses TBB; their threads are then theirs to join.
  ~TbbSession() {
    arena_.terminate();
    oneapi::tbb::finalize(handle_, std::nothrow);
  }

  // Runs f (which starts parallel algorithms) in this session's arena.
  template <class F>
  decltype(auto) run(F&& f) {
    release();
    struct AcquireOnExit {
      TbbSession* s;
      ~AcquireOnExit() { s->acquire(); }
    } on_exit{this};
    return arena_.execute(std::forward<F>(f));
  }

  // Wraps the body of a parallel algorithm (each body and join of parallel_reduce).
  // ThreadSanitizer cannot see the synchronisation inside libtbb, which is not
  // instrumented; this declares the order TBB guarantees: what the caller wrote
  // before run() happens before every task, and every task before run() returns.
  template <class Body>
  auto task(Body body) {
    return [this, body](auto&&... args) {
      acquire();
      struct ReleaseOnExit {
        TbbSession* s;
        ~ReleaseOnExit() { s->release(); }
      } on_exit{this};
      return body(std::forward<decltype(args)>(args)...);
    };
  }

 private:
#ifdef HOGWILD_TSAN
  void acquire() {
    __tsan_acquire(this);
  }
  void release() {
    __tsan_release(this);
  }
#else
  void acquire() {}
  void release() {}
#endif

  // Declared first: it must outlive the arena and be finalized after it.
  oneapi::tbb::task_scheduler_handle handle_{oneapi::tbb::attach{}};
  oneapi::tbb::task_arena arena_;
};

}  // namespace hogwild::detail
