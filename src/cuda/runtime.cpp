// The CUDA runtime's side of the GPU half: whether there is a device, the fork
// guard at every initialisation, device memory through the VMM API and through
// legacy IPC (memory/device_arena.hpp), and the host's access to device floats.
//
// The driver API is reached through cudaGetDriverEntryPointByVersion rather than by
// linking libcuda: the runtime (linked statically) loads the driver when there is
// one, so this library loads and runs, and says "no CUDA device", on a machine
// without one.
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>
#include <mutex>

#include "cuda/check.hpp"
#include "hogwild/device.hpp"
#include "hogwild/error.hpp"
#include "hogwild/memory_space.hpp"
#include "memory/cuda_guard.hpp"
#include "memory/device_arena.hpp"

namespace hogwild::detail {

namespace {

// The driver entry points the VMM path uses (CUDA 12.0's signatures).
struct Driver {
  decltype(&::cuGetErrorString) error_string = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemExportToShareableHandle) export_handle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) import_handle = nullptr;
};

template <class F>
void entry(const char* name, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  HOGWILD_CUDA(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || p == nullptr)
    throw ConfigError(fmt::format("the CUDA driver has no {} (the VMM API needs CUDA 10.2 or "
                                  "later; --cuda-ipc legacy does without it)", name));
  fn = reinterpret_cast<F>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    entry("cuGetErrorString", x.error_string);
    entry("cuMemGetAllocationGranularity", x.granularity);
    entry("cuMemCreate", x.create);
    entry("cuMemRelease", x.release);
    entry("cuMemAddressReserve", x.reserve);
    entry("cuMemAddressFree", x.address_free);
    entry("cuMemMap", x.map);
    entry("cuMemUnmap", x.unmap);
    entry("cuMemSetAccess", x.set_access);
    entry("cuMemExportToShareableHandle", x.export_handle);
    entry("cuMemImportFromShareableHandle", x.import_handle);
    return x;
  }();
  return d;
}

std::string free_memory() {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return "unknown";
  return fmt::format("{:.1f} MiB free of {:.1f} MiB", free / 1048576.0, total / 1048576.0);
}

[[noreturn]] void out_of_memory(std::size_t bytes, const char* how) {
  throw ResourceError(fmt::format("out of device memory: {} asked for {:.1f} MiB, {}", how,
                                  bytes / 1048576.0, free_memory()));
}

CUmemAllocationProp vmm_properties(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

// One process's mapping of a VMM allocation. The allocation handle is released
// right after mapping: the mapping (and the exported descriptor) keep the memory,
// which the driver frees when the last of them goes, in whichever process.
class VmmMapping final : public DeviceMapping {
 public:
  // Takes h (released here, mapped or not) and fd (closed with the mapping, or
  // here when mapping fails): nothing leaks when this throws.
  VmmMapping(CUmemGenericAllocationHandle h, std::size_t bytes, int device, int fd)
      : size_(bytes), fd_(fd) {
    const Driver& d = driver();
    const auto fail = [&](int result, const char* call) {
      if (fd >= 0) close(fd);
      driver_failed(result, call, __FILE__, __LINE__);
    };
    CUdeviceptr p = 0;
    if (const int reserved = d.reserve(&p, bytes, 0, 0, 0); reserved != 0) {
      d.release(h);
      fail(reserved, "cuMemAddressReserve");
    }
    const int mapped = d.map(p, bytes, 0, h, 0);
    d.release(h);
    if (mapped != 0) {
      d.address_free(p, bytes);
      fail(mapped, "cuMemMap");
    }
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (const int set = d.set_access(p, bytes, &access, 1); set != 0) {
      d.unmap(p, bytes);
      d.address_free(p, bytes);
      fail(set, "cuMemSetAccess");
    }
    base_ = reinterpret_cast<std::byte*>(p);
  }
  ~VmmMapping() override {
    const Driver& d = driver();
    const auto p = reinterpret_cast<CUdeviceptr>(base_);
    d.unmap(p, size_);
    d.address_free(p, size_);
    if (fd_ >= 0) close(fd_);
  }
  std::byte* base() const noexcept override { return base_; }
  std::size_t size() const noexcept override { return size_; }
  DeviceHandle handle() const override { return {fd_, {}}; }

 private:
  std::byte* base_ = nullptr;
  std::size_t size_;
  int fd_;
};

class VmmMemory final : public DeviceMemory {
 public:
  explicit VmmMemory(int device) : device_(device) {}
  std::string_view name() const noexcept override { return "vmm"; }
  std::size_t granularity() const override {
    std::size_t g = 0;
    const CUmemAllocationProp p = vmm_properties(device_);
    HOGWILD_CU(driver().granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    return g;
  }
  bool shares_fd() const noexcept override { return true; }
  std::unique_ptr<DeviceMapping> allocate(std::size_t bytes) override {
    const Driver& d = driver();
    const CUmemAllocationProp p = vmm_properties(device_);
    CUmemGenericAllocationHandle h{};
    const int r = d.create(&h, bytes, &p, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) out_of_memory(bytes, "cuMemCreate");
    if (r != 0) driver_failed(r, "cuMemCreate", __FILE__, __LINE__);
    int fd = -1;
    const int exported = d.export_handle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (exported != 0) {
      d.release(h);
      driver_failed(exported, "cuMemExportToShareableHandle", __FILE__, __LINE__);
    }
    auto m = std::make_unique<VmmMapping>(h, bytes, device_, fd);
    HOGWILD_CUDA(cudaMemset(m->base(), 0, bytes));
    HOGWILD_CUDA(cudaDeviceSynchronize());
    return m;
  }
  std::unique_ptr<DeviceMapping> import(const DeviceHandle& handle, std::size_t bytes) override {
    CUmemGenericAllocationHandle h{};
    HOGWILD_CU(driver().import_handle(
        &h, reinterpret_cast<void*>(static_cast<std::intptr_t>(handle.fd)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    return std::make_unique<VmmMapping>(h, bytes, device_, -1);
  }

 private:
  int device_;
};

// Legacy IPC: cudaMalloc in the exporter, cudaIpcOpenMemHandle in each importer.
// The exporter frees only when the run ends, after every importer is gone (freeing
// first is undefined); 2 MiB granularity, because a handle shares the whole
// underlying cudaMalloc block.
class LegacyMapping final : public DeviceMapping {
 public:
  LegacyMapping(std::byte* p, std::size_t bytes, bool owner, DeviceHandle h)
      : base_(p), size_(bytes), owner_(owner), handle_(h) {}
  ~LegacyMapping() override {
    if (owner_) cudaFree(base_);
    else cudaIpcCloseMemHandle(base_);
  }
  std::byte* base() const noexcept override { return base_; }
  std::size_t size() const noexcept override { return size_; }
  DeviceHandle handle() const override { return handle_; }

 private:
  std::byte* base_;
  std::size_t size_;
  bool owner_;
  DeviceHandle handle_;
};

class LegacyMemory final : public DeviceMemory {
 public:
  std::string_view name() const noexcept override { return "legacy"; }
  std::size_t granularity() const override { return std::size_t{2} << 20; }
  bool shares_fd() const noexcept override { return false; }
  std::unique_ptr<DeviceMapping> allocate(std::size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      out_of_memory(bytes, "cudaMalloc");
    }
    HOGWILD_CUDA(e);
    cudaIpcMemHandle_t ipc{};
    const cudaError_t got = cudaIpcGetMemHandle(&ipc, p);
    if (got != cudaSuccess) {
      cudaFree(p);
      cuda_failed(got, "cudaIpcGetMemHandle", __FILE__, __LINE__);
    }
    DeviceHandle h;
    static_assert(sizeof(ipc) == sizeof(h.legacy));
    std::memcpy(h.legacy.data(), &ipc, sizeof(ipc));
    HOGWILD_CUDA(cudaMemset(p, 0, bytes));
    HOGWILD_CUDA(cudaDeviceSynchronize());
    return std::make_unique<LegacyMapping>(static_cast<std::byte*>(p), bytes, true, h);
  }
  std::unique_ptr<DeviceMapping> import(const DeviceHandle& handle, std::size_t bytes) override {
    cudaIpcMemHandle_t ipc{};
    std::memcpy(&ipc, handle.legacy.data(), sizeof(ipc));
    void* p = nullptr;
    HOGWILD_CUDA(cudaIpcOpenMemHandle(&p, ipc, cudaIpcMemLazyEnablePeerAccess));
    return std::make_unique<LegacyMapping>(static_cast<std::byte*>(p), bytes, false, handle);
  }
};

// The host's reads and writes of device floats and halves (initialisation,
// snapshots, checkpoints): copies across the bus, on the legacy default stream, which waits
// for the kernels before it.
struct DeviceAccess final : HostAccess {
  void read(float* dst, const float* src, std::size_t n) const override {
    HOGWILD_CUDA(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
  }
  void write(float* dst, const float* src, std::size_t n) const override {
    HOGWILD_CUDA(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
  }
  void read_bytes(void* dst, const void* src, std::size_t bytes) const override {
    HOGWILD_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void write_bytes(void* dst, const void* src, std::size_t bytes) const override {
    HOGWILD_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
};

}  // namespace

void cuda_failed(cudaError_t e, const char* call, const char* file, int line) {
  const std::string what = fmt::format("{} failed at {}:{}: {} ({})", call, file, line,
                                       cudaGetErrorString(e), cudaGetErrorName(e));
  if (e == cudaErrorMemoryAllocation) throw ResourceError(what + "; " + free_memory());
  throw Error(what);
}

void driver_failed(int result, const char* call, const char* file, int line) {
  const char* s = nullptr;
  if (driver().error_string) driver().error_string(static_cast<CUresult>(result), &s);
  const std::string what =
      fmt::format("{} failed at {}:{}: {} (CUresult {})", call, file, line, s ? s : "?", result);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw ResourceError(what + "; " + free_memory());
  throw Error(what);
}

void cuda_init(const std::string& what, int device) {
  check_cuda_usable(what);
  const CudaStatus s = cuda_status();
  if (!s.ok) throw ConfigError("no CUDA device: " + s.message);
  if (device >= s.devices)
    throw ConfigError(fmt::format("{} needs CUDA device {}, and this machine has {}", what,
                                  device, s.devices));
  HOGWILD_CUDA(cudaSetDevice(device));
  static DeviceAccess access;
  static std::once_flag registered;
  std::call_once(registered, [] { register_device_access(access); });
}

std::size_t device_free_bytes() {
  std::size_t free = 0, total = 0;
  HOGWILD_CUDA(cudaMemGetInfo(&free, &total));
  return free;
}

void device_synchronize() { HOGWILD_CUDA(cudaDeviceSynchronize()); }

std::unique_ptr<DeviceMemory> cuda_device_memory(CudaIpc ipc) {
  cuda_init("device memory");
  int device = 0;
  HOGWILD_CUDA(cudaGetDevice(&device));
  if (ipc == CudaIpc::legacy) return std::make_unique<LegacyMemory>();
  driver();  // every entry point now, so that a missing one is said before training
  return std::make_unique<VmmMemory>(device);
}

}  // namespace hogwild::detail

namespace hogwild {

CudaStatus cuda_status() {
  detail::check_cuda_usable("asking for a CUDA device");
  CudaStatus s;
  const cudaError_t e = cudaGetDeviceCount(&s.devices);
  if (e != cudaSuccess) {
    cudaGetLastError();
    s.devices = 0;
    s.message = fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
    return s;
  }
  detail::note_cuda_initialised();
  if (s.devices == 0) {
    s.message = "the CUDA driver found no device";
    return s;
  }
  cudaDeviceProp p{};
  HOGWILD_CUDA(cudaGetDeviceProperties(&p, 0));
  s.ok = true;
  s.message = fmt::format("{} (sm_{}{}, {:.1f} GiB){}", p.name, p.major, p.minor,
                          p.totalGlobalMem / 1073741824.0,
                          s.devices > 1 ? fmt::format(", and {} more", s.devices - 1) : "");
  return s;
}

}  // namespace hogwild
