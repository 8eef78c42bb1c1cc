// Where a tensor's floats live, and how the host reads and writes them there.
//
// Everything that touches parameter memory from the host outside a step (the
// initialisation, epoch snapshots and evaluation copies, checkpoint capture and
// restore, the result's copies) goes through host_access(space): plain copies for
// a process's own memory, relaxed loads and stores for the shared arena (other
// workers write it meanwhile: THE INTENDED RACE, update_policy.hpp), and copies
// across the bus for device memory, which a GPU build registers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hogwild {

// host_shared: the arena every worker maps; host_private: one process's memory (a
// replica, a snapshot, a test's arrays); device: GPU memory.
enum class MemorySpace : std::uint8_t { host_shared, host_private, device };
const char* to_string(MemorySpace s) noexcept;

// How the host reaches floats of one memory space.
class HostAccess {
 public:
  virtual ~HostAccess() = default;
  // dst[0, n) (host memory of this process) = src[0, n) (in this space).
  virtual void read(float* dst, const float* src, std::size_t n) const = 0;
  // dst[0, n) (in this space) = src[0, n) (host memory of this process).
  virtual void write(float* dst, const float* src, std::size_t n) const = 0;
};

// The access for `space`. device: the one a GPU build registered; a ConfigError
// naming the missing support otherwise.
const HostAccess& host_access(MemorySpace space);
// Called once by a build with device memory (the CUDA half) before any training.
void register_device_access(const HostAccess& access) noexcept;

}  // namespace hogwild
