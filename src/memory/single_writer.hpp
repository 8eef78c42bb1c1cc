// Fields in shared memory that one process writes and others read while it runs.
#pragma once

#include <atomic>
#include <type_traits>

namespace hogwild::detail {

// A plain field in the arena that one process writes and others read while it
// runs (--telemetry's histograms, --conflicts' slots): the writer adds with a
// relaxed load and store (no read-modify-write: nobody else writes), readers load
// it relaxed.
template <class T>
void owner_add(T& field, std::type_identity_t<T> value) noexcept {
  std::atomic_ref<T> f(field);
  f.store(f.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}
template <class T>
T relaxed_read(const T& field) noexcept {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}

}  // namespace hogwild::detail
