#include "device/device_backend.hpp"

#include <atomic>

#include "memory/device_arena.hpp"

namespace hogwild::detail {

namespace {

class CudaBackend final : public DeviceBackend {
 public:
  CudaStatus status() const override { return cuda_status(); }
  std::shared_ptr<DeviceMemory> memory(CudaIpc ipc) const override {
    return cuda_device_memory(ipc);
  }
  std::unique_ptr<DeviceSteps> steps(const TrainConfig& cfg, DeviceAccess access,
                                     const Model& model, const Dataset& data,
                                     const float* targets, const ParamSet& params, int* lock,
                                     const StoredRows* rows, unsigned rank) const override {
    return make_device_steps(cfg, access, model, data, targets, params, lock, rows, rank);
  }
  std::unique_ptr<Communicator> communicator(unsigned rank, unsigned size, int device,
                                             const NcclIdExchange& exchange,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<std::int32_t>* stop) const override {
    char id[128];
    exchange(id, make_nccl_id);
    return make_nccl_communicator(rank, size, device, id, timeout, stop);
  }
};

std::atomic<const DeviceBackend*> g_backend{nullptr};

}  // namespace

std::unique_ptr<Communicator> DeviceBackend::communicator(unsigned, unsigned, int,
                                                          const NcclIdExchange&,
                                                          std::chrono::milliseconds,
                                                          const std::atomic<std::int32_t>*) const {
  return nullptr;
}

const DeviceBackend& device_backend() {
  static const CudaBackend cuda;
  const DeviceBackend* b = g_backend.load(std::memory_order_acquire);
  return b ? *b : cuda;
}

void register_device_backend(const DeviceBackend* backend) noexcept {
  g_backend.store(backend, std::memory_order_release);
}

}  // namespace hogwild::detail
