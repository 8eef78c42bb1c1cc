// The linear models' loss and its slope at a margin, one definition for the CPU's
// step (models/linear.cpp) and the GPU's kernel (cuda/linear.cu), so the two train
// the same model.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define HOGWILD_HOST_DEVICE __host__ __device__
#else
#define HOGWILD_HOST_DEVICE
#endif

namespace hogwild::detail {

// kind: LinearLoss (0 logistic, 1 hinge, 2 squared). y: the 0/1 label (logistic,
// hinge) or the target (squared; -1/+1 from a 0/1 label when signed_targets).
HOGWILD_HOST_DEVICE inline void linear_loss_and_slope(std::uint8_t kind, bool signed_targets,
                                                      float z, float y, float& loss,
                                                      float& slope) {
  switch (kind) {
    case 0: {
      // loss = log(1 + exp(-s z)), s = 2y - 1, computed without overflow. One exp
      // serves both: e = exp(-|z|), sigmoid(z) = 1/(1+e) or e/(1+e).
      const float sz = (2 * y - 1) * z;
      const float e = expf(-fabsf(z));
      loss = log1pf(e) + (sz < 0 ? -sz : 0.f);
      slope = (z >= 0 ? 1.f : e) / (1 + e) - y;
      return;
    }
    case 1: {
      const float s = 2 * y - 1;
      const float m = 1 - s * z;
      loss = m > 0 ? m : 0;
      slope = m > 0 ? -s : 0;
      return;
    }
    default: {
      const float r = z - (signed_targets ? 2 * y - 1 : y);
      loss = 0.5f * r * r;
      slope = r;
      return;
    }
  }
}

}  // namespace hogwild::detail
