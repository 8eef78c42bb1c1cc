// Softmax's dense layer (all classes' dots per row, the batch's outer-product update;
// float rows and byte rows read in place), compiled for AVX-512, AVX2+FMA and
// baseline x86-64 and chosen at run time. Here with the instruction set named (tests
// and benchmarks); the models call detail::dense_multi_dot_shared and
// dense_outer_update_shared (update_policy.hpp), which take best_isa(). isa must be
// supported. On these shapes ours beat oneDNN by 1.2-1.4x (docs/PERFORMANCE.md,
// "Kernels: ours or a library").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hogwild::kernels {

// Instruction sets the kernels are compiled for, best last.
enum class Isa : unsigned char { generic, avx2, avx512 };

std::string_view to_string(Isa isa) noexcept;
bool supported(Isa isa) noexcept;
Isa best_isa() noexcept;  // the one the models' calls use

// dst[i] = src[i] / 255 to within rounding (a dense_u8 row as floats), vectorised.
void widen_bytes(Isa isa, float* dst, const std::uint8_t* src, std::size_t n) noexcept;
void widen_bytes(float* dst, const std::uint8_t* src, std::size_t n) noexcept;  // best_isa()

void multi_dot(Isa isa, const float* W, std::size_t ld, std::size_t rows, const float* x,
               std::size_t n, float* out) noexcept;
void multi_dot(Isa isa, const float* W, std::size_t ld, std::size_t rows, const std::uint8_t* x,
               std::size_t n, float* out) noexcept;
void outer_update(Isa isa, float* W, std::size_t ld, std::size_t rows, const float* coeff,
                  std::size_t cs, const float* const* xs, std::size_t count,
                  std::size_t n) noexcept;
void outer_update(Isa isa, float* W, std::size_t ld, std::size_t rows, const float* coeff,
                  std::size_t cs, const std::uint8_t* const* xs, std::size_t count,
                  std::size_t n) noexcept;

}  // namespace hogwild::kernels
