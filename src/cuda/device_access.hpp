// How a mode's steps write the weights on a GPU (--device cuda): what a mode states
// (ModeDef::device_access) and the kernels are compiled for (cuda/kernels.hpp).
#pragma once

#include <cstdint>

namespace hogwild::detail {

// hogwild: relaxed loads and stores (cuda::atomic_ref, device scope: THE
// INTENDED RACE, as on the CPU, update_policy.hpp); atomic: atomicAdd for each
// write; lock: one spin lock in device memory (the device arena's, so shared by
// every process) held by a warp around its whole example; serial: one warp.
// gradient (--mode ddp): the weights are only read, and each example's gradient
// is added (atomicAdd) to the tensors' gradient buffers (the *_grad pointers),
// which launch_apply then applies once the ranks have summed them.
enum class DeviceAccess : std::uint8_t { serial, hogwild, atomic, lock, gradient };

}  // namespace hogwild::detail
