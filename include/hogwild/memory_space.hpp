// Where a tensor's values live, what they are (Dtype), and how the host reads and
// writes them there.
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
#include <string>

namespace hogwild {

// host_shared: the arena every worker maps; host_private: one process's memory (a
// replica, a snapshot, a test's arrays); device: GPU memory.
enum class MemorySpace : std::uint8_t { host_shared, host_private, device };
const char* to_string(MemorySpace s) noexcept;

// What a tensor's values are in its memory: floats, or IEEE binary16 halves (MF's
// factor rows under --factors fp16, on the GPU only: the CPU's steps, replicas and
// servers are fp32). The host always sees floats: read_values / write_values convert.
enum class Dtype : std::uint8_t { f32, f16 };
const char* to_string(Dtype t) noexcept;          // "fp32", "fp16"
Dtype parse_dtype(const char* option, const std::string& name);  // ConfigError naming option
constexpr std::size_t element_bytes(Dtype t) noexcept { return t == Dtype::f16 ? 2 : 4; }

// How the host reaches floats of one memory space.
class HostAccess {
 public:
  virtual ~HostAccess() = default;
  // dst[0, n) (host memory of this process) = src[0, n) (in this space).
  virtual void read(float* dst, const float* src, std::size_t n) const = 0;
  // dst[0, n) (in this space) = src[0, n) (host memory of this process).
  virtual void write(float* dst, const float* src, std::size_t n) const = 0;
  // The same for bytes (halves): dst[0, bytes) = src[0, bytes).
  virtual void read_bytes(void* dst, const void* src, std::size_t bytes) const = 0;
  virtual void write_bytes(void* dst, const void* src, std::size_t bytes) const = 0;
};

// The access for `space`. device: the one a GPU build registered; a ConfigError
// naming the missing support otherwise.
const HostAccess& host_access(MemorySpace space);
// Called once by a build with device memory (the CUDA half) before any training.
void register_device_access(const HostAccess& access) noexcept;

// dst[0, n) = values [begin, begin + n) of the array at `base` (in `space`, of
// `type`), as floats: halves are widened, exactly.
void read_values(MemorySpace space, Dtype type, const void* base, std::size_t begin,
                 std::size_t n, float* dst);
// Values [begin, begin + n) of the array at `base` = src[0, n): for halves, each
// float rounded to the nearest half (ties to even, as the GPU's stores).
void write_values(MemorySpace space, Dtype type, void* base, std::size_t begin, const float* src,
                  std::size_t n);

}  // namespace hogwild
