#include "trainer/device_backend.hpp"

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
  std::unique_ptr<DeviceSteps> steps(const TrainConfig& cfg, const Model& model,
                                     const Dataset& data, const float* targets,
                                     const ParamSet& params, int* lock,
                                     const StoredRows* rows) const override {
    return make_device_steps(cfg, model, data, targets, params, lock, rows);
  }
};

std::atomic<const DeviceBackend*> g_backend{nullptr};

}  // namespace

const DeviceBackend& device_backend() {
  static const CudaBackend cuda;
  const DeviceBackend* b = g_backend.load(std::memory_order_acquire);
  return b ? *b : cuda;
}

void register_device_backend(const DeviceBackend* backend) noexcept {
  g_backend.store(backend, std::memory_order_release);
}

}  // namespace hogwild::detail
