// Where a run's parameter tensors (and their optimiser state) live: the seam the
// device arena plugs into. The CPU's store puts them in the run's shared arena
// beside the trainer's control blocks, where every forked worker maps them. The
// device store (--device cuda) puts them in a device arena (memory/device_arena.hpp)
// whose table it keeps in the host arena, hands workers its descriptor, and the
// host reaches them through host_access(MemorySpace::device)
// (include/hogwild/memory_space.hpp).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hogwild/arena.hpp"
#include "hogwild/dataset.hpp"
#include "hogwild/param_set.hpp"

namespace hogwild::detail {

// A dataset's arrays (those of its layout; the others null) and its targets, in a
// store's memory.
struct StoredRows {
  const std::uint64_t* offsets = nullptr;
  const std::uint32_t* index = nullptr;
  const float* value = nullptr;
  const std::uint8_t* pixels = nullptr;
  const float* target = nullptr;
};

class TensorStore {
 public:
  virtual ~TensorStore() = default;
  virtual MemorySpace space() const = 0;
  // The blocks this store needs in the run's host arena (for the shared store the
  // tensors themselves; `tail_bytes` more after tensor 0, for the hot window).
  virtual std::vector<BlockSpec> arena_blocks(const std::vector<TensorSpec>& specs, bool state,
                                              std::size_t tail_bytes) const = 0;
  // Once the arena exists, before any worker starts: the tensors, optimiser state
  // zeroed, the weights not yet initialised. In a worker started from a
  // description (`attach`): the tensors its parent made, `fd` being the descriptor
  // the parent's handle() sent along (or -1).
  virtual ParamSet open(const Arena& arena, const std::vector<TensorSpec>& specs, bool state,
                        bool attach = false, int fd = -1) = 0;
  // A descriptor a worker started from a description needs beside the host arena's
  // (the device arena's, shared by VMM), or -1.
  virtual int handle() const { return -1; }
  // The lock word of --mode lock's device kernels (in the store's memory), or null.
  virtual int* device_lock() const { return nullptr; }
  // The training rows in the store's memory, or null: the device store keeps them
  // in its arena, uploaded once by the parent and mapped by every worker.
  virtual const StoredRows* rows() const { return nullptr; }
};

class DeviceMemory;
// The store for `space`. device: tensors in a device arena allocated from
// `device_memory()` (CUDA's, or the memfd stand-in in tests), beside `rows` and
// their `targets` (one per row) when given.
std::unique_ptr<TensorStore> make_tensor_store(
    MemorySpace space, std::function<std::shared_ptr<DeviceMemory>()> device_memory = {},
    const Dataset* rows = nullptr, const float* targets = nullptr);

// The arena blocks of a tensor and of its optimiser state (also the names they
// have in a checkpoint).
std::string param_block(const std::string& tensor);
std::string state_block(const std::string& tensor);

// Writes each tensor's initial values (TensorSpec::init, drawn from `seed`)
// through write_values (halves rounded from the same draws), a chunk at a time.
// On a fresh arena (its host tensors read as zeros): Init::zeros tensors on the host
// are left as they are.
void initialise(const ParamSet& params, const std::vector<TensorSpec>& specs, std::uint64_t seed);

}  // namespace hogwild::detail
