// Dense matrix products for the models' dense layers (the MLP), through oneDNN
// (Debian's libdnnl, the library behind PyTorch's CPU path): C = A·B (+ C) on
// strided row-major operands, in fp32 (dnnl_sgemm) or on bf16 operands with float
// sums (its matmul primitive, on CPUs with AVX512-BF16). On the MLP's shapes it was
// as fast as our own GEMM kernels or faster (docs/PERFORMANCE.md, "Kernels: ours or a
// library"), which it replaced; the AMX tile unit keeps ours (gemm_bf16.hpp), and
// softmax's byte-row layer its own (dense_layer.hpp).
//
// One thread per call: Debian builds oneDNN on OpenMP, and each call sets the calling
// thread's OpenMP team size to 1 for its duration, so that no worker starts a team
// of threads (and no forked child inherits one).
//
// oneDNN reads A and B and writes C with loads and stores of its own, so all three
// must be private to the caller. A live shared tensor (THE INTENDED RACE,
// include/hogwild/update_policy.hpp) takes part through a copy read in whole lanes
// (copy_from_shared, or to_bf16, whose rounding copy reads whole lanes too), and a
// product bound for a live C goes to a private buffer first, which
// detail::dense_axpy_shared then adds in whole lanes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hogwild::kernels {

// A read-only strided matrix view: element (i, k) is data[i * rs + k * cs]. One of
// the strides is 1 (a row-major matrix or a transposed view of one).
struct Matrix {
  const float* data;
  std::ptrdiff_t rs;  // row stride, in floats
  std::ptrdiff_t cs;  // column stride, in floats
};
// The same over bf16 values (the upper 16 bits of a float, as to_bf16 rounds them).
struct Bf16Matrix {
  const std::uint16_t* data;
  std::ptrdiff_t rs;
  std::ptrdiff_t cs;
};

// C (m x n, row-major, row stride ldc) = A (m x k) · B (k x n), plus C when
// accumulate (C + the product's sum, one rounding: a caller that scales an operand
// gets the same bits whether it adds into C here or into a zeroed buffer added later).
void gemm(std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, bool accumulate,
          float* c, std::size_t ldc);
// C = alpha A·B (+ C) on bf16 operands, the sums in float, alpha applied to the
// sums (as on the AMX tiles: the operands are rounded unscaled). Requires
// bf16_supported().
void gemm(std::size_t m, std::size_t n, std::size_t k, Bf16Matrix a, Bf16Matrix b,
          bool accumulate, float* c, std::size_t ldc, float alpha = 1);

// Whether the bf16 products run here: the CPU has AVX512-BF16 (Intel Cooper Lake and
// Sapphire Rapids, AMD Zen 4 and later) and HOGWILD_DISABLE_AVX512BF16 is unset.
bool bf16_supported() noexcept;
// What is missing, for error messages; empty when bf16_supported().
std::string bf16_unsupported_reason();

// dst[0, n) = scale * src[0, n) rounded to bf16 (to nearest even). src may be a live
// shared tensor: it is read in whole vector lanes (whole floats where the CPU has no
// AVX512-BF16), the dense read half of THE INTENDED RACE (tests/tsan.supp names this
// function).
__attribute__((noinline)) void to_bf16(const float* src, std::size_t n, std::uint16_t* dst,
                                       float scale = 1) noexcept;

// dst[0, n) = src[0, n) where src is a live shared tensor that other workers write:
// whole 16-byte lanes, the dense read half of THE INTENDED RACE
// (include/hogwild/update_policy.hpp); src floats at any offset (those before its
// first 16-byte boundary are read one at a time). Also every copy of a live shared
// arena (SharedAccess: the epochs' evaluation snapshots, checkpoints, model files).
__attribute__((noinline)) void copy_from_shared(float* dst, const float* src,
                                                std::size_t n) noexcept;

}  // namespace hogwild::kernels
