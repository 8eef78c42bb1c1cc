// A process-shared, robust POSIX mutex that lives in the arena. "Robust" means a
// worker killed while holding it does not freeze the others: the next locker gets
// EOWNERDEAD, marks the mutex consistent and carries on (the dead worker's
// half-applied mini-batch stays, as any Hogwild update would).
#pragma once

#include <pthread.h>

namespace hogwild {

class RobustMutex {
 public:
  // Initialise in place, in shared memory, before forking.
  void init();
  void lock();
  void unlock() noexcept { pthread_mutex_unlock(&m_); }
  // How many times a lock was recovered from a dead owner.
  unsigned recoveries() const noexcept { return recoveries_; }

 private:
  pthread_mutex_t m_;
  unsigned recoveries_ = 0;
};

class RobustLock {
 public:
  explicit RobustLock(RobustMutex& m) : m_(m) { m_.lock(); }
  ~RobustLock() { m_.unlock(); }
  RobustLock(const RobustLock&) = delete;
  RobustLock& operator=(const RobustLock&) = delete;

 private:
  RobustMutex& m_;
};

}  // namespace hogwild
