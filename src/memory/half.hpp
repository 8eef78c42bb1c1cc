// IEEE binary16 ("half") on the host: what --factors fp16 stores on the GPU (MF's
// factor rows at 2 bytes a value, halving the bytes each rating moves), converted
// where the host reads or writes such a tensor (initialisation, snapshots for
// evaluation, checkpoints). Portable code, no F16C or _Float16: the library builds
// with any x86-64 compiler, and these conversions are off the training path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hogwild::detail {

// The half nearest to x, ties to even (as the GPU's __float2half_rn): values from
// 65,520 up overflow to infinity, below 2^-25 they flush to a signed zero, NaN stays
// NaN.
std::uint16_t float_to_half(float x) noexcept;
// The half's value, exactly (every half is a float).
float half_to_float(std::uint16_t h) noexcept;

void halves_to_floats(const std::uint16_t* src, std::size_t n, float* dst) noexcept;
void floats_to_halves(const float* src, std::size_t n, std::uint16_t* dst) noexcept;

}  // namespace hogwild::detail
