// The dense kernel (src/kernels/gemm.hpp) against the naive triple loop, for every
// instruction set this CPU supports, on edge shapes (rows and columns that do not
// fill a register tile, k beyond one packed block, k = 0), transposed operands and
// accumulation, live (shared) operands; and the copy of a shared tensor.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "hogwild/rng.hpp"
#include "kernels/gemm.hpp"

using namespace hogwild;
using kernels::Isa;
using kernels::Matrix;

namespace {

std::vector<float> random(std::size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// A view of a rows x cols matrix stored row-major (or column-major when transposed).
Matrix view(const std::vector<float>& v, std::size_t rows, std::size_t cols, bool transposed) {
  (void)rows;
  return transposed ? Matrix{v.data(), 1, static_cast<std::ptrdiff_t>(rows)}
                    : Matrix{v.data(), static_cast<std::ptrdiff_t>(cols), 1};
}

}  // namespace

TEST_CASE("gemm matches the naive loop on every supported instruction set") {
  Rng rng(3);
  int checked = 0;
  for (Isa isa : {Isa::generic, Isa::avx2, Isa::avx512}) {
    if (!kernels::supported(isa)) {
      MESSAGE("skipping " << kernels::to_string(isa) << ": not supported by this CPU");
      continue;
    }
    for (std::size_t m : {1u, 5u, 8u, 13u, 33u})
      for (std::size_t n : {1u, 15u, 32u, 40u})
        for (std::size_t k : {0u, 1u, 7u, 300u})
          for (int layout = 0; layout < 16; ++layout) {
            const bool ta = layout & 1, tb = layout & 2;
            // A live operand changes how it is loaded and stored, not the result.
            const kernels::Live live{(layout & 4) != 0, (layout & 8) != 0};
            const bool accumulate = (m + n + k) % 2 == 1;
            auto a = random(m * k, rng), b = random(k * n, rng);
            const std::size_t ldc = n + 3;  // a row stride wider than the row
            auto c = random(m * ldc, rng), expected = c;
            kernels::gemm(isa, m, n, k, view(a, m, k, ta), view(b, k, n, tb), c.data(), ldc,
                          accumulate, live);
            kernels::gemm_naive(m, n, k, view(a, m, k, ta), view(b, k, n, tb), expected.data(),
                                ldc, accumulate);
            INFO(kernels::to_string(isa) << " m=" << m << " n=" << n << " k=" << k
                                         << " ta=" << ta << " tb=" << tb << " acc=" << accumulate
                                         << " live a=" << live.a << " c=" << live.c);
            for (std::size_t i = 0; i < c.size(); ++i) {
              // Entries are sums of k products of unit normals: scale sqrt(k + 1).
              REQUIRE(c[i] == doctest::Approx(expected[i]).epsilon(1e-5).scale(std::sqrt(static_cast<double>(k) + 1)));
            }
            ++checked;
          }
  }
  CHECK(checked >= 1280);
  CHECK(kernels::supported(kernels::best_isa()));
}

TEST_CASE("copy_from_shared copies every float, including a tail shorter than a lane") {
  Rng rng(5);
  for (std::size_t n : {0u, 3u, 8u, 29u, 1000u}) {
    auto src = random(n + 1, rng);
    std::vector<float> dst(n + 1, -7.f);
    kernels::copy_from_shared(dst.data(), src.data(), n);
    for (std::size_t i = 0; i < n; ++i) CHECK(dst[i] == src[i]);
    CHECK(dst[n] == -7.f);
  }
}
