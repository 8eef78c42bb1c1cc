// Dense single-precision matrix products for the models' dense layers (the MLP):
// C = A·B or C += A·B with strided operands, so that transposes cost nothing at the
// call site. Private to the library (src/): a BLIS-shaped loop nest with a
// register-tiled micro-kernel, compiled for AVX-512, AVX2+FMA and baseline x86-64
// and chosen at run time from what the CPU supports (docs/MODELS.md has the
// measurements behind the choice).
#pragma once

#include <cstddef>
#include <string_view>

namespace hogwild::kernels {

// A read-only strided matrix view: element (i, k) is data[i * rs + k * cs].
struct Matrix {
  const float* data;
  std::ptrdiff_t rs;  // row stride, in floats
  std::ptrdiff_t cs;  // column stride, in floats
};

// Instruction sets the kernel is compiled for, best last.
enum class Isa : unsigned char { generic, avx2, avx512 };

std::string_view to_string(Isa isa) noexcept;
bool supported(Isa isa) noexcept;
Isa best_isa() noexcept;  // the one gemm() uses

// Which operands of a product are live shared tensors, read and written by other
// workers while it runs: the dense half of THE INTENDED RACE
// (include/hogwild/update_policy.hpp). A live A is read one whole float per element
// (a single broadcast load, as relaxed_load reads one); a live C in whole vector
// lanes, as dense_axpy_shared writes them, its last columns (n not a multiple of
// the tile) through relaxed std::atomic_ref. B is always private.
struct Live {
  bool a = false;
  bool c = false;
};

// C (m x n, row-major, row stride ldc) = A (m x k) · B (k x n), or += when
// accumulate. Single-threaded; uses a small per-thread packing buffer.
void gemm(std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, float* c,
          std::size_t ldc, bool accumulate, Live live = {});
// The same with a given instruction set (tests and benchmarks); isa must be supported.
void gemm(Isa isa, std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, float* c,
          std::size_t ldc, bool accumulate, Live live = {});
// The textbook triple loop: the reference for tests and the baseline for bench_gemm.
void gemm_naive(std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, float* c,
                std::size_t ldc, bool accumulate);

// dst[0, n) = src[0, n) where src is a live shared tensor that other workers write:
// whole 16-byte lanes, the dense read half of THE INTENDED RACE
// (include/hogwild/update_policy.hpp). src must be 16-byte aligned.
__attribute__((noinline)) void copy_from_shared(float* dst, const float* src,
                                                std::size_t n) noexcept;

}  // namespace hogwild::kernels
