// Where a run trains: the CPU (the shared arena in host memory) or a CUDA GPU (the
// model's tensors in device memory shared by every worker process through CUDA
// IPC). The GPU half is built where the CUDA toolkit is found (-Dcuda); docs/GPU.md
// says how it works and how to run it.
#pragma once

#include <cstdint>
#include <string>

namespace hogwild {

enum class Device : std::uint8_t { cpu, cuda };
const char* to_string(Device d) noexcept;
Device parse_device(const std::string& name);  // ConfigError on anything but cpu or cuda

// How workers share device memory. vmm: the driver's virtual memory API
// (cuMemCreate with a POSIX file-descriptor handle, passed over a Unix socket);
// legacy: cudaIpcGetMemHandle / cudaIpcOpenMemHandle (a 64-byte handle, the path
// PyTorch's share_memory_() takes).
enum class CudaIpc : std::uint8_t { vmm, legacy };
const char* to_string(CudaIpc c) noexcept;
CudaIpc parse_cuda_ipc(const std::string& name);  // ConfigError on anything but vmm or legacy

// Whether this process can train on a GPU, and if not, why (what the driver said,
// or that this build has no CUDA code). Initialises CUDA in the calling process
// when there is a driver: call it where CUDA may run (not in a process that forks
// workers afterwards, see fork_server.hpp).
struct CudaStatus {
  bool ok = false;
  int devices = 0;
  std::string message;  // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" or why not
};
CudaStatus cuda_status();

// True when this build has the GPU half (HOGWILD_HAVE_CUDA in hogwild/config.hpp).
bool cuda_built() noexcept;

}  // namespace hogwild
