// The Communicator: how the ranks of a data-parallel run (--mode ddp, dp, ps) add
// up their gradients. One interface, a backend per transport: shared memory on one
// machine (src/comm/shm.cpp), Gloo across machines (src/comm/gloo.cpp), NCCL across
// GPUs. Every rank calls the same operations in the same order.
#pragma once

#include <cstddef>
#include <span>

namespace hogwild {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual unsigned rank() const noexcept = 0;
  virtual unsigned size() const noexcept = 0;
  // Every rank's `data` becomes the element-wise sum over all ranks (the same
  // floats, bit for bit, on every rank). Throws when the run is stopped or a peer
  // is gone, rather than waiting for ever.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  // Returns when every rank has called it.
  virtual void barrier() = 0;
};

}  // namespace hogwild
