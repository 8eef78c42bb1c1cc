// Parameter tensors: what a model declares (TensorSpec, its Init), where a tensor
// lives (MemorySpace), and the set a step receives (ParamSet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hogwild/memory_space.hpp"

namespace hogwild {

// How a tensor is initialised by the parent before the workers start.
struct Init {
  enum Kind : std::uint8_t { zeros, normal, uniform } kind = zeros;
  float scale = 0;  // standard deviation (normal) or half-width (uniform)
};

struct TensorSpec {
  std::string name;
  std::size_t size = 0;  // values
  Init init{};
  // What the values are in memory (the optimiser's state is always fp32). fp16: MF's
  // factors under --factors fp16, trained on the GPU only.
  Dtype dtype = Dtype::f32;
  // Its shape, row-major, as a model file (--save-model) records it: softmax's W is
  // {classes, stride}, an MLP layer's {out, in}. Empty: one dimension of `size`.
  std::vector<std::size_t> shape = {};
};

// Sorted, disjoint [begin, end) runs of a tensor's coordinates (empty: all of it).
using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

// The parameters as a step sees them: one float array per TensorSpec, in the
// order the model declared them, each with the memory space it lives in. Live
// parameters point into the trainer's tensor store (src/trainer/tensor_store.hpp:
// the shared arena on the CPU); evaluation runs on a private host snapshot with
// the same shape.
class ParamSet {
 public:
  struct Tensor {
    std::string name;
    float* data;
    std::size_t size;
    float* state = nullptr;  // optimiser state of the same size (AdaGrad), else null
    float* grad = nullptr;   // the gradient path's buffer of the same size (gradient.hpp)
    bool exclusive = false;  // as ParamSet::exclusive()
    // Where data, state and grad live: the host dereferences them only outside
    // `device`, and outside a step only through host_access (memory_space.hpp).
    MemorySpace space = MemorySpace::host_private;
    // f16: `data` holds `size` IEEE halves, not floats (a device tensor under
    // --factors fp16, which only the GPU's kernels step); the host reads and writes
    // it through read_values / write_values, which convert. state and grad stay fp32.
    Dtype dtype = Dtype::f32;
  };
  ParamSet() = default;
  explicit ParamSet(std::vector<Tensor> t, bool exclusive = false)
      : tensors_(std::move(t)), exclusive_(exclusive) {
    for (auto& x : tensors_) x.exclusive = exclusive;
  }
  // The space of the tensors (they share one); host_private for an empty set.
  MemorySpace space() const noexcept {
    return tensors_.empty() ? MemorySpace::host_private : tensors_[0].space;
  }
  bool on_host() const noexcept { return space() != MemorySpace::device; }
  float* data(std::size_t i) const noexcept { return tensors_[i].data; }
  std::size_t size(std::size_t i) const noexcept { return tensors_[i].size; }
  std::size_t count() const noexcept { return tensors_.size(); }
  const Tensor& tensor(std::size_t i) const noexcept { return tensors_[i]; }
  const Tensor& operator[](std::size_t i) const noexcept { return tensors_[i]; }
  const std::vector<Tensor>& tensors() const noexcept { return tensors_; }
  // True when one worker alone reads and writes these floats while it trains (its
  // replica under --merge-every): a model may then treat them as private even in a
  // shared mode, as the MLP does. False for the shared arena.
  bool exclusive() const noexcept { return exclusive_; }

 private:
  std::vector<Tensor> tensors_;
  bool exclusive_ = false;
};

}  // namespace hogwild
