// The built-in models' options (--l2, --hidden, --rank, --matmul-precision, --factors).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hogwild/memory_space.hpp"

namespace hogwild {

// The precision of a model's matrix products (the MLP's): fp32, or bf16 operands
// summed in float on the CPU's AMX tile unit or with its AVX512-BF16 instructions
// through oneDNN (what PyTorch's set_float32_matmul_precision("medium") allows); the
// weights, the SGD step and evaluation stay float either way.
enum class MatmulPrecision : unsigned char { fp32, bf16 };
MatmulPrecision parse_matmul_precision(const std::string& name);  // "fp32" | "bf16"
const char* to_string(MatmulPrecision p) noexcept;

// Options shared by the built-in models (a user model may ignore them).
struct ModelOptions {
  float l2 = 0;      // L2 penalty lambda/2 * ||w||^2 (bias excluded)
  bool bias = true;  // learn an intercept
  std::vector<std::size_t> hidden{256, 128};  // mlp: widths of the hidden layers
  std::size_t rank = 10;  // matrix factorization: factors per user and per item
  // mlp: the training products' operands (evaluation is always fp32). bf16 needs
  // AMX-BF16 (kernels::bf16::available) or AVX512-BF16 (kernels::bf16_supported);
  // other models reject it.
  MatmulPrecision matmul = MatmulPrecision::fp32;
  // mf: the factor rows' storage. fp16 (--factors fp16, with --device cuda only)
  // halves the bytes a rating moves; the kernel computes in fp32 and rounds each
  // stored value to the nearest half. Biases and AdaGrad's state stay fp32.
  Dtype factors = Dtype::f32;
};

}  // namespace hogwild
