// Matrix products with bfloat16 operands and float accumulation on the AMX tile
// unit (Intel Sapphire Rapids and later): the MLP's products under
// --matmul-precision bf16 where the CPU has it, what
// torch.set_float32_matmul_precision("medium") and CPU autocast do. (Without AMX,
// the MLP's bf16 products go through oneDNN on AVX512-BF16: kernels/gemm.hpp.)
// The weights stay float (the SGD step adds to float W); only the products'
// operands are rounded to bf16 (8 significant bits, round to nearest even), and every
// sum is float. A tile product is 16 x 16 x 32 multiply-adds in one instruction, so
// the products stop being the cost; packing the operands and adding the step to W
// are what remain.
//
// Operands are packed: M and N padded to multiples of 16, K to a multiple of 32,
// the padding zero. A is row-major (row stride pad(k, 32)); B is in the tile
// unit's pair layout ("VNNI"): element (p, j) at ((p / 2) * pad(n, 16) + j) * 2 + p % 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hogwild::kernels::bf16 {

// Whether the products can run here: the CPU has AMX-BF16 and AVX-512BW and the
// kernel grants this process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM,
// asked once per process; forked children inherit it).
bool available() noexcept;
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

// C = A · B (or C += alpha * A · B) for packed A (m x k) and B (k x n).
// Requires available().
void gemm(std::size_t m, std::size_t n, std::size_t k, const std::uint16_t* a,
          const std::uint16_t* b, float* c, std::size_t ldc, Epilogue epilogue = Epilogue::store,
          float alpha = 1);

}  // namespace hogwild::kernels::bf16
