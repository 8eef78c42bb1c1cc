// Where a run's parameter tensors (and their optimiser state) live: the seam a
// device arena plugs into. The CPU's store puts them in the run's shared arena
// beside the trainer's control blocks, where every forked worker maps them; a
// device store (the GPU modes) would allocate them in GPU memory and hand workers
// IPC handles, the host reaching them through host_access(MemorySpace::device)
// (include/hogwild/memory_space.hpp). A mode names its space (ModeDef::space).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "hogwild/arena.hpp"
#include "hogwild/param_set.hpp"

namespace hogwild::detail {

class TensorStore {
 public:
  virtual ~TensorStore() = default;
  virtual MemorySpace space() const = 0;
  // The blocks this store needs in the run's host arena (for the shared store the
  // tensors themselves; `tail_bytes` more after tensor 0, for the hot window).
  virtual std::vector<BlockSpec> arena_blocks(const std::vector<TensorSpec>& specs, bool state,
                                              std::size_t tail_bytes) const = 0;
  // Once the arena exists, before any worker starts: the tensors, optimiser state
  // zeroed, the weights not yet initialised.
  virtual ParamSet open(const Arena& arena, const std::vector<TensorSpec>& specs,
                        bool state) = 0;
};

// The store for `space`; a ConfigError where this build has none (device memory
// without the GPU half).
std::unique_ptr<TensorStore> make_tensor_store(MemorySpace space);

// The arena blocks of a tensor and of its optimiser state (also the names they
// have in a checkpoint).
std::string param_block(const std::string& tensor);
std::string state_block(const std::string& tensor);

// Writes each tensor's initial values (TensorSpec::init, drawn from `seed`)
// through host_access, a chunk at a time.
void initialise(const ParamSet& params, const std::vector<TensorSpec>& specs, std::uint64_t seed);

}  // namespace hogwild::detail
