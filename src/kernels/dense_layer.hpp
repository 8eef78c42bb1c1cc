// The dense layer's kernels with the instruction set named (tests and benchmarks;
// the models call detail::dense_multi_dot_shared and dense_outer_update_shared,
// update_policy.hpp, which take kernels::best_isa()). isa must be supported.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gemm.hpp"

namespace hogwild::kernels {

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
