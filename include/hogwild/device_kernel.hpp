// A model's kernel on the GPU: what lets a model train with --device cuda. Each
// built-in model registers one under its name; a model of your own registers one
// under its --model name, as it registers its factory (model_registry.hpp):
//
//   class HuberKernel : public hogwild::DeviceKernel {
//     void launch(const hogwild::DeviceChunk& c) override { launch_huber(c, w_, ...); }
//   };
//   hogwild::register_device_kernel("huber", {.make = [](const hogwild::DeviceKernelSetup& s) {
//     return std::make_unique<HuberKernel>(s.params.data(0), ...);
//   }});
//
// launch_huber is your __global__ kernel's launch, in a .cu file of your own (nvcc;
// docs/GPU.md, "Add a GPU kernel"). A chunk is positions [begin, begin + count) of
// the epoch's order of rows, each row trained as the mode's access says. This
// header holds no CUDA type, so host files and .cu files both include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace hogwild {

class Model;
class ParamSet;
struct TrainConfig;

// How a mode's steps write the weights on a GPU (a mode states its own). hogwild:
// relaxed device-scope loads and stores (cuda::atomic_ref: THE INTENDED RACE, as
// on the CPU, update_policy.hpp); atomic: atomicAdd for each write; lock: one spin
// lock in device memory (DeviceChunk::lock, shared by every process) held around a
// whole example; serial: one writer. gradient (--mode ddp): the weights are only
// read, and each example's gradient is added (atomicAdd) to the tensors' gradient
// buffers (DeviceKernelSetup::grads), which the trainer applies once the ranks
// have summed them.
enum class DeviceAccess : std::uint8_t { serial, hogwild, atomic, lock, gradient };

// Rows on the device and their targets: CSR (sparse and rating layouts: offsets
// set), dense floats (value, cols a row) or dense bytes (pixels, value = byte / 255).
struct DeviceRows {
  const std::uint64_t* offsets = nullptr;
  const std::uint32_t* index = nullptr;
  const float* value = nullptr;
  const std::uint8_t* pixels = nullptr;
  std::uint64_t cols = 0;
  const float* target = nullptr;
};

// One launch's work: rows [begin, begin + count) of the order, at step size lr.
struct DeviceChunk {
  DeviceRows rows;
  const std::uint32_t* order = nullptr;  // the epoch's order of rows, on the device
  std::size_t begin = 0, count = 0;
  float lr = 0;
  DeviceAccess access = DeviceAccess::hogwild;
  bool adagrad = false;
  int* lock = nullptr;          // lock mode: a zeroed int in device memory
  double* loss_sum = nullptr;   // add the chunk's losses here (each before its update)
  void* stream = nullptr;       // the worker's cudaStream_t: launch on it
  unsigned warps = 0;           // concurrent warps (TrainConfig::device_warps; 0 = resident)
};

// A worker's kernel for its model. The trainer waits for the chunk's stream after
// each launch and reads the loss back.
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  // Trains the chunk: launches on chunk.stream (and waits for any other stream it
  // used).
  virtual void launch(const DeviceChunk& chunk) = 0;
  // Examples a launch: enough to keep the device busy, few enough that a stop is
  // seen within milliseconds. The default: 65,536, and 4,096 for one warp
  // (serial).
  virtual std::size_t chunk_size(DeviceAccess access) const;
};

// What a kernel is made from, in the worker that trains.
struct DeviceKernelSetup {
  const TrainConfig& config;
  const Model& model;             // configured (its sizes known)
  const ParamSet& params;         // the model's tensors, in device memory
  std::span<float* const> grads;  // gradient access: tensor i's gradient buffer; else nulls
  DeviceAccess access;
  void* stream;                   // the worker's cudaStream_t
};

struct DeviceKernelDef {
  // Throws ConfigError for what the kernel does not train (an option, a mode's
  // access), before anything is allocated; may be empty.
  std::function<void(const TrainConfig&, const Model&, DeviceAccess)> check;
  std::function<std::unique_ptr<DeviceKernel>(const DeviceKernelSetup&)> make;
  // Whether every example writes the model's bias (when ModelOptions::bias): under
  // --mode atomic their adds to it serialise, which the automatic --device-warps
  // counts.
  bool bias_in_every_example = false;
  // Whether its launches run --device-warps warps, each a Hogwild! worker (the MLP's
  // mini-batches on streams do not): the run then says how many it chose.
  bool warps = true;
};

// Registers model `model`'s kernel, replacing any it had (ConfigError without make).
// Register it before start_fork_server(), beside register_model: the workers are
// forked from the server and look the kernel up there.
void register_device_kernel(const std::string& model, DeviceKernelDef def);
// The models with a kernel, sorted.
std::vector<std::string> device_kernel_models();

}  // namespace hogwild
