// The shared-weight vector kernels of include/hogwild/update_policy.hpp against
// plain double-precision references, at every length around the vector widths (so
// the main loops, the masked or scalar tails and the empty case all run), and on
// indices spread over a large weight vector.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "hogwild/rng.hpp"
#include "hogwild/update_policy.hpp"
#include "kernels/dense_layer.hpp"

using namespace hogwild;

namespace {

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform() * 2 - 1);
  return v;
}

}  // namespace

TEST_CASE("sparse_dot_shared equals the sum of w[index] * value for every length") {
  const std::size_t features = 1 << 20;
  const std::vector<float> w = uniform(features, 1);
  Rng rng(2);
  for (std::uint32_t nnz = 0; nnz <= 70; ++nnz) {
    std::vector<std::uint32_t> index(nnz);
    for (auto& j : index) j = static_cast<std::uint32_t>(rng.below(features));
    if (nnz > 0) index.back() = features - 1;  // the last float of the vector
    const std::vector<float> value = uniform(nnz, 100 + nnz);
    double want = 0, scale = 0;
    for (std::uint32_t k = 0; k < nnz; ++k) {
      want += static_cast<double>(w[index[k]]) * value[k];
      scale += std::fabs(static_cast<double>(w[index[k]]) * value[k]);
    }
    CAPTURE(nnz);
    const float got = detail::sparse_dot_shared(w.data(), index.data(), value.data(), nnz);
    CHECK(std::fabs(got - want) <= 1e-6 * (scale + 1));
    // Every update mode's sparse_dot is this kernel (serial included, so that a
    // serial run and a one-worker hogwild run compute the same margins).
    CHECK(HogwildUpdate::sparse_dot(w.data(), index.data(), value.data(), nnz) == got);
    CHECK(SerialUpdate::sparse_dot(w.data(), index.data(), value.data(), nnz) == got);
    CHECK(AtomicUpdate::sparse_dot(w.data(), index.data(), value.data(), nnz) == got);
  }
}

TEST_CASE("dense_dot_shared and dense_axpy_shared match the reference for every length") {
  for (std::size_t n = 0; n <= 70; ++n) {
    const std::vector<float> w = uniform(n, 3 + n), x = uniform(n, 200 + n);
    double want = 0;
    for (std::size_t i = 0; i < n; ++i) want += static_cast<double>(w[i]) * x[i];
    CAPTURE(n);
    CHECK(std::fabs(detail::dense_dot_shared(w.data(), x.data(), n) - want) <= 1e-5);
    std::vector<float> d = w;
    detail::dense_axpy_shared(d.data(), 0.5f, x.data(), n);
    for (std::size_t i = 0; i < n; ++i) CHECK(d[i] == doctest::Approx(w[i] + 0.5f * x[i]));
  }
}

// A dense row of either storage: floats in [-1, 1], or bytes read as byte / 255.
template <class T>
std::vector<T> row_of(std::size_t n, std::uint64_t seed) {
  if constexpr (std::is_same_v<T, float>) {
    return uniform(n, seed);
  } else {
    Rng rng(seed);
    std::vector<T> v(n);
    for (auto& b : v) b = static_cast<T>(rng.next() & 255);
    return v;
  }
}
double value_of(float x) { return x; }
double value_of(std::uint8_t b) { return b / 255.0; }

template <class T>
void check_multi_dot(kernels::Isa isa) {
  for (std::size_t rows : {1u, 2u, 3u, 7u, 8u, 10u, 12u, 13u, 15u, 16u, 17u, 19u, 33u}) {
    for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 33u, 784u}) {
      const std::size_t ld = n + 5;  // a stride wider than the row, as softmax's padding
      const std::vector<float> W = uniform(rows * ld, rows * 1000 + n);
      const std::vector<T> x = row_of<T>(n, n + 7);
      std::vector<float> out(rows + 1, 42.f);
      kernels::multi_dot(isa, W.data(), ld, rows, x.data(), n, out.data());
      CAPTURE(rows);
      CAPTURE(n);
      for (std::size_t r = 0; r < rows; ++r) {
        double want = 0;
        for (std::size_t i = 0; i < n; ++i)
          want += static_cast<double>(W[r * ld + i]) * value_of(x[i]);
        CHECK(std::fabs(out[r] - want) <= 1e-5 * (1 + static_cast<double>(n)));
      }
      CHECK(out[rows] == 42.f);  // nothing written past the last row
    }
  }
}

template <class T>
void check_outer_update(kernels::Isa isa) {
  for (std::size_t rows : {1u, 3u, 8u, 10u, 12u, 13u, 25u}) {
    for (std::size_t n : {1u, 8u, 13u, 16u, 31u, 32u, 47u, 784u}) {
      for (std::size_t count : {1u, 5u, 32u}) {
        const std::size_t ld = n + 3, cs = rows + 2;
        std::vector<float> W = uniform(rows * ld, 17 + rows + n + count);
        const std::vector<float> before = W, coeff = uniform(count * cs, 99 + count);
        std::vector<std::vector<T>> x;
        std::vector<const T*> xs;
        for (std::size_t b = 0; b < count; ++b) x.push_back(row_of<T>(n, 500 + b));
        for (auto& v : x) xs.push_back(v.data());
        kernels::outer_update(isa, W.data(), ld, rows, coeff.data(), cs, xs.data(), count, n);
        CAPTURE(rows);
        CAPTURE(n);
        CAPTURE(count);
        for (std::size_t r = 0; r < rows; ++r) {
          for (std::size_t i = 0; i < ld; ++i) {
            double want = before[r * ld + i];
            if (i < n)
              for (std::size_t b = 0; b < count; ++b)
                want += static_cast<double>(coeff[b * cs + r]) * value_of(x[b][i]);
            CHECK(std::fabs(W[r * ld + i] - want) <= 1e-5 * (1 + static_cast<double>(count)));
          }
        }
      }
    }
  }
}

constexpr kernels::Isa kIsas[] = {kernels::Isa::generic, kernels::Isa::avx2,
                                  kernels::Isa::avx512};

TEST_CASE("dense_multi_dot gives every row's dot product, float and byte rows, every ISA") {
  for (kernels::Isa isa : kIsas) {
    if (!kernels::supported(isa)) {
      MESSAGE("skipping " << kernels::to_string(isa) << ": not supported by this CPU");
      continue;
    }
    CAPTURE(kernels::to_string(isa));
    check_multi_dot<float>(isa);
    check_multi_dot<std::uint8_t>(isa);
  }
  // The entry points the models call take the best instruction set.
  const std::vector<float> W = uniform(3 * 40, 5), x = uniform(37, 6);
  float got[3], want[3];
  detail::dense_multi_dot_shared(W.data(), 40, 3, x.data(), 37, got);
  kernels::multi_dot(kernels::best_isa(), W.data(), 40, 3, x.data(), 37, want);
  for (int r = 0; r < 3; ++r) CHECK(got[r] == want[r]);
}

TEST_CASE("dense_outer_update adds sum_b coeff[b][r] * x_b to every row, nothing else") {
  for (kernels::Isa isa : kIsas) {
    if (!kernels::supported(isa)) continue;
    CAPTURE(kernels::to_string(isa));
    check_outer_update<float>(isa);
    check_outer_update<std::uint8_t>(isa);
  }
}

TEST_CASE("widen_bytes gives every byte / 255 and writes nothing past n, every ISA") {
  int checked = 0;
  for (kernels::Isa isa : kIsas) {
    if (!kernels::supported(isa)) continue;
    CAPTURE(kernels::to_string(isa));
    for (std::size_t n : {0u, 1u, 3u, 4u, 7u, 8u, 15u, 16u, 17u, 33u, 784u}) {
      std::vector<std::uint8_t> src(n + 16);
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 37 + 11);
      std::vector<float> dst(n + 1, -1.f);
      kernels::widen_bytes(isa, dst.data(), src.data(), n);
      CAPTURE(n);
      for (std::size_t i = 0; i < n; ++i)
        CHECK(dst[i] == doctest::Approx(src[i] / 255.0).epsilon(1e-6).scale(1e-7));
      CHECK(dst[n] == -1.f);
      ++checked;
    }
  }
  CHECK(checked >= 11);
}
