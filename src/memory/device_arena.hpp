// The device arena: the model's tensors (and the optimiser's state) in one device
// allocation, made once by the supervisor and mapped by every worker process. It is
// the device counterpart of hogwild::Arena, behind the tensor store's seam
// (trainer/tensor_store.hpp).
//
// Shared structures hold offsets, never device pointers: each process maps the
// allocation at an address of its own. What another process needs to map it is a
// DeviceArenaTable (plain bytes, kept in the run's host arena) plus, for memory that
// is shared by file descriptor, that descriptor (passed with SCM_RIGHTS over a Unix
// socket made before fork: process.hpp's send_message).
//
// How memory is allocated, exported and imported is a DeviceMemory: CUDA's VMM API
// and legacy cudaIpc (src/cuda/), or host memory standing in (a memfd), on which
// the host-side logic of this file is tested where no GPU is.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hogwild/arena.hpp"
#include "hogwild/device.hpp"

namespace hogwild::detail {

// What travels to a process that maps an allocation: a file descriptor (VMM, the
// memfd stand-in) or the 64 bytes of a cudaIpcMemHandle_t (legacy).
struct DeviceHandle {
  int fd = -1;
  std::array<std::byte, 64> legacy{};
};

// One process's mapping of an allocation; unmapping (and, for the allocating
// process, releasing its reference) happens in the destructor.
class DeviceMapping {
 public:
  virtual ~DeviceMapping() = default;
  virtual std::byte* base() const noexcept = 0;  // in this process's address space
  virtual std::size_t size() const noexcept = 0;
  // What another process needs to map it (the fd stays owned by the mapping).
  virtual DeviceHandle handle() const = 0;
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // "vmm", "legacy", "host stand-in".
  virtual std::string_view name() const noexcept = 0;
  // Allocation sizes are multiples of this.
  virtual std::size_t granularity() const = 0;
  // True: handles are file descriptors, sent beside the table.
  virtual bool shares_fd() const noexcept = 0;
  // A zero-filled allocation of `bytes` (a multiple of granularity()), mapped here.
  // ResourceError (exit 4) when the device lacks the memory, naming what was asked
  // and what is free.
  virtual std::unique_ptr<DeviceMapping> allocate(std::size_t bytes) = 0;
  // Maps what another process allocated. Error when the handle maps nothing.
  virtual std::unique_ptr<DeviceMapping> import(const DeviceHandle& handle, std::size_t bytes) = 0;
};

// Initialises CUDA in this process (device `device`) for `what`: refuses a process
// forked after CUDA (memory/cuda_guard.hpp), throws ConfigError "no CUDA device:
// ..." where there is none, and registers host_access(MemorySpace::device).
void cuda_init(const std::string& what, int device = 0);
// Free bytes of device memory on this process's device (after cuda_init).
std::size_t device_free_bytes();
// Waits for all of this process's work on its device.
void device_synchronize();

// The DeviceMemory for `ipc` (src/cuda/); ConfigError in a build without CUDA.
std::unique_ptr<DeviceMemory> cuda_device_memory(CudaIpc ipc);
// Host memory standing in for device memory: memfd_create + mmap, shared by fd as
// VMM memory is, with the page size as granularity.
std::unique_ptr<DeviceMemory> host_standin_memory();

// The arena's layout, in plain bytes that every process can read: block names,
// offsets (256-byte aligned, as CUDA's allocations are) and sizes, the total size,
// and the legacy handle where there is one.
struct DeviceArenaTable {
  static constexpr std::uint32_t kMagic = 0x48574441;  // "HWDA"
  static constexpr std::size_t kAlignment = 256;
  struct Entry {
    char name[48];
    std::uint64_t offset;
    std::uint64_t bytes;
  };
  std::uint32_t magic = 0;
  std::uint32_t count = 0;
  std::uint64_t size = 0;
  std::array<std::byte, 64> legacy{};
  std::array<Entry, Arena::kMaxBlocks> entries{};

  // Lays out `blocks` in order; size is rounded up to `granularity`. ConfigError on
  // a duplicate or over-long name or too many blocks.
  static DeviceArenaTable lay_out(const std::vector<BlockSpec>& blocks, std::size_t granularity);
  // The entry named `name`; Error naming the block when there is none.
  const Entry& find(std::string_view name) const;
  // Error when this is not a table that lay_out wrote (a stale or foreign block).
  void check() const;
};

class DeviceArena {
 public:
  // Allocates the arena for `blocks` (zeroed) in `memory`.
  static DeviceArena create(std::shared_ptr<DeviceMemory> memory,
                            const std::vector<BlockSpec>& blocks);
  // Maps the arena another process created: its table and, where memory shares
  // file descriptors, the descriptor received from it (the arena keeps a duplicate).
  static DeviceArena attach(std::shared_ptr<DeviceMemory> memory, const DeviceArenaTable& table,
                            int fd);

  DeviceArena() = default;
  DeviceArena(DeviceArena&&) noexcept = default;
  DeviceArena& operator=(DeviceArena&&) noexcept = default;

  const DeviceArenaTable& table() const noexcept { return table_; }
  // The descriptor to send to a worker beside the table, -1 where there is none.
  int handle() const { return mapping_ ? mapping_->handle().fd : -1; }
  // The block's first byte, a device address in this process.
  std::byte* block(std::string_view name) const;
  template <class T>
  T* array(std::string_view name) const {
    return reinterpret_cast<T*>(block(name));
  }
  std::size_t size() const noexcept { return table_.size; }
  std::string_view ipc() const noexcept { return memory_ ? memory_->name() : "none"; }

 private:
  std::shared_ptr<DeviceMemory> memory_;
  std::unique_ptr<DeviceMapping> mapping_;
  DeviceArenaTable table_{};
};

}  // namespace hogwild::detail
