#include "memory/robust_mutex.hpp"

#include <cerrno>
#include <cstring>

#include "hogwild/error.hpp"

namespace hogwild {

void RobustMutex::init() {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  int rc = pthread_mutex_init(&m_, &a);
  pthread_mutexattr_destroy(&a);
  if (rc != 0) throw Error(std::string("pthread_mutex_init: ") + std::strerror(rc));
  recoveries_ = 0;
}

void RobustMutex::lock() {
  int rc = pthread_mutex_lock(&m_);
  if (rc == EOWNERDEAD) {
    // The owner died inside its mini-batch; its partial update stays (as a lost
    // Hogwild update would) and the mutex is usable again.
    pthread_mutex_consistent(&m_);
    ++recoveries_;
    return;
  }
  if (rc != 0) throw Error(std::string("pthread_mutex_lock: ") + std::strerror(rc));
}

}  // namespace hogwild
