// Matrix products with bfloat16 operands and float accumulation: the MLP's
// products under --matmul-precision bf16, what torch.set_float32_matmul_precision
// ("medium") and CPU autocast do. The weights stay float (the SGD step adds to
// float W); only the products' operands are rounded to bf16 (8 significant bits,
// round to nearest even), and every sum is float. Two units run them, chosen at run
// time: the AMX tile unit (Intel Sapphire Rapids and later: 16 x 16 x 32
// multiply-adds per instruction) and, where it is absent, AVX512-BF16 (vdpbf16ps:
// 16 lanes of two multiply-adds each; Intel Cooper Lake, AMD Zen 4 and later).
//
// Operands are packed: M and N padded to multiples of 16, K to a multiple of 32,
// the padding zero. A is row-major (row stride pad(k, 32)); B is in the pair layout
// ("VNNI") both units read: element (p, j) at ((p / 2) * pad(n, 16) + j) * 2 + p % 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hogwild::kernels::bf16 {

// The units that run the products, best first.
enum class Unit : unsigned char { amx, avx512 };
std::string_view to_string(Unit unit) noexcept;
// amx: the CPU has AMX-BF16 and AVX-512BW/VL and the kernel grants this process the
// tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once per process; forked
// children inherit it); HOGWILD_DISABLE_AMX=1 turns it off. avx512: the CPU has
// AVX512-BF16 and AVX-512BW/VL; HOGWILD_DISABLE_AVX512BF16=1 turns it off.
bool supported(Unit unit) noexcept;
// Whether the products can run here: some unit is supported.
bool available() noexcept;
// The unit gemm() uses (the best supported); requires available().
Unit best_unit() noexcept;
// What is missing, for error messages; empty when available().
std::string unavailable_reason();

constexpr std::size_t pad(std::size_t n, std::size_t to) noexcept {
  return (n + to - 1) / to * to;
}
constexpr std::size_t kRows = 16;  // M and N are padded to this
constexpr std::size_t kDepth = 32;  // K is padded to this

using Packed = std::vector<std::uint16_t>;

// A float rounded to bf16, to nearest even (as pack_a and pack_b round).
std::uint16_t round(float x) noexcept;
float widen(std::uint16_t b) noexcept;

// dst = the m x k matrix src(i, p) = src[i * rs + p * cs] as an A operand, in
// dst's first pad(m, 16) * pad(k, 32) elements (dst grows to hold them and never
// shrinks, so that one buffer serves operands of several sizes without refilling).
// live: src is a live shared tensor other workers write (THE INTENDED RACE,
// include/hogwild/update_policy.hpp); it must then have cs == 1, and is read in
// whole vector lanes.
void pack_a(std::size_t m, std::size_t k, const float* src, std::ptrdiff_t rs,
            std::ptrdiff_t cs, Packed& dst, bool live = false);
// dst = the k x n matrix src(p, j) = src[p * rs + j * cs] as a B operand; live as
// for pack_a.
void pack_b(std::size_t k, std::size_t n, const float* src, std::ptrdiff_t rs,
            std::ptrdiff_t cs, Packed& dst, bool live = false);

// B operands from rows of bytes (dense_u8 pixels, value byte / 255 as
// Dataset::row gives them), each row at its own address. pack_b_byte_columns: the
// k x n matrix whose column j is the k bytes at columns[j] (the input rows of a
// batch as the forward product's H). pack_b_byte_rows: the k x n matrix whose row
// p is the n bytes at rows[p] (the same rows as the weight gradient's H^T).
void pack_b_byte_columns(std::size_t k, std::size_t n, const std::uint8_t* const* columns,
                         Packed& dst);
void pack_b_byte_rows(std::size_t k, std::size_t n, const std::uint8_t* const* rows, Packed& dst);

// What the product does with C (m x n of it, row stride ldc floats): store it;
// store its transpose (c[j * ldc + i], n x m); or add alpha times it to a live C
// in whole vector lanes (the SGD step into shared W).
enum class Epilogue : unsigned char { store, store_transposed, add_live };

// C = A · B (or C += alpha * A · B) for packed A (m x k) and B (k x n), on
// best_unit(). Requires available().
void gemm(std::size_t m, std::size_t n, std::size_t k, const std::uint16_t* a,
          const std::uint16_t* b, float* c, std::size_t ldc, Epilogue epilogue = Epilogue::store,
          float alpha = 1);
// The same on the unit named (tests and benchmarks); it must be supported.
void gemm(Unit unit, std::size_t m, std::size_t n, std::size_t k, const std::uint16_t* a,
          const std::uint16_t* b, float* c, std::size_t ldc, Epilogue epilogue = Epilogue::store,
          float alpha = 1);

}  // namespace hogwild::kernels::bf16
