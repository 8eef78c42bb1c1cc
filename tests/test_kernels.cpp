// The shared-weight vector kernels of include/hogwild/update_policy.hpp against
// plain double-precision references, at every length around the vector widths (so
// the main loops, the masked or scalar tails and the empty case all run), and on
// indices spread over a large weight vector.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "hogwild/rng.hpp"
#include "hogwild/update_policy.hpp"

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
