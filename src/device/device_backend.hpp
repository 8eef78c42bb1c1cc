// What the trainer asks of a device: whether there is one, its memory, and a
// worker's steps on it. The CUDA half is the backend (src/cuda/); a program (a
// test on a machine without a GPU) may register another before training, such as
// host memory standing in for device memory with the CPU's steps standing in for
// the kernels, which runs the trainer's device path — the device store, the
// descriptors in the worker description, the chunked step loop, restarts and
// checkpoints — where no GPU is.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "comm/nccl.hpp"
#include "comm/communicator.hpp"
#include "hogwild/device.hpp"
#include "device/device_steps.hpp"
#include "trainer/tensor_store.hpp"

namespace hogwild::detail {

class DeviceMemory;

// Hands NCCL's unique id from rank 0, which makes it with `make`, to the others:
// through the run's host arena on one machine (exchange_nccl_id), through the
// rendezvous store across machines (store_exchange_nccl_id).
using NcclIdExchange =
    std::function<void(char (&id)[128], const std::function<void(char (&)[128])>& make)>;

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual CudaStatus status() const = 0;
  virtual std::shared_ptr<DeviceMemory> memory(CudaIpc ipc) const = 0;
  // `rows`: the training rows and targets in device memory (the store's), or null
  // (the steps then upload `data` and `targets` themselves). `rank`: the worker's
  // (under --mode ddp, also its GPU's number). `access`: the mode's.
  virtual std::unique_ptr<DeviceSteps> steps(const TrainConfig& cfg, DeviceAccess access,
                                             const Model& model, const Dataset& data,
                                             const float* targets, const ParamSet& params,
                                             int* lock, const StoredRows* rows,
                                             unsigned rank) const = 0;
  // --mode ddp: rank `rank` of `size`'s Communicator over the steps' memory, on GPU
  // `device` (CUDA's: NCCL, its group's id made by rank 0 and handed to the others
  // by `exchange`), or null for the run's own (over host memory).
  virtual std::unique_ptr<Communicator> communicator(unsigned rank, unsigned size, int device,
                                                     const NcclIdExchange& exchange,
                                                     std::chrono::milliseconds timeout,
                                                     const std::atomic<std::int32_t>* stop) const;
};

// The registered backend, or CUDA's.
const DeviceBackend& device_backend();
// Registers `backend` (it must outlive every run; null: CUDA's again). Call it
// before start_fork_server(), so that the server's workers have it too.
void register_device_backend(const DeviceBackend* backend) noexcept;

}  // namespace hogwild::detail
