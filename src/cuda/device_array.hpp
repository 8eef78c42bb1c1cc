// One cudaMalloc'd array of T on this process's current device, freed with the
// object (the steps' private buffers).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda/check.hpp"

namespace hogwild::detail {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) : n_(n) {
    if (n) HOGWILD_CUDA(cudaMalloc(&p_, n * sizeof(T)));
  }
  DeviceArray(const T* host, std::size_t n) : DeviceArray(n) {
    if (n) HOGWILD_CUDA(cudaMemcpy(p_, host, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  DeviceArray(DeviceArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace hogwild::detail
