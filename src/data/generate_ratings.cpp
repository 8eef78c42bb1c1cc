// Synthetic low-rank rating matrices: the matrix-factorization problem of the Hogwild!
// paper (Netflix, KDD Cup) with a known answer. The best possible test RMSE is the
// noise level, so a test can check how close training gets to it. Power-law user
// and item popularity gives the hot rows (a few users and items in most ratings)
// that decide how Hogwild scales. Random numbers come from hogwild::Rng (our own
// xoshiro256**), so a seed names the same data with every standard library.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/rng.hpp"

namespace hogwild {

namespace {

void validate(const RatingsGenerateOptions& o) {
  auto range = [](const char* what, std::size_t v, std::size_t lo, std::size_t hi) {
    if (v < lo || v > hi)
      throw ConfigError(std::string("generate: ") + what + " must be between " +
                        std::to_string(lo) + " and " + std::to_string(hi) + ", not " +
                        std::to_string(v));
  };
  range("users", o.users, 1, kMaxRatingId);
  range("items", o.items, 1, kMaxRatingId);
  range("rank", o.rank, 1, 1024);
  range("ratings", o.ratings, 1, std::size_t{1} << 32);
  range("test ratings", o.test_ratings, 0, std::size_t{1} << 32);
  if ((o.users + o.items) * o.rank > (std::size_t{1} << 27))  // 1 GiB of doubles
    throw ConfigError("generate: (users + items) * rank must be at most 2^27 hidden factors, not " +
                      std::to_string((o.users + o.items) * o.rank));
  if (!(o.noise >= 0.0 && o.noise <= 100.0))
    throw ConfigError("generate: noise must be between 0 and 100, not " + std::to_string(o.noise));
  if (!(o.zipf_exponent >= 0.0 && o.zipf_exponent <= 10.0))
    throw ConfigError("generate: the Zipf exponent must be between 0 and 10, not " +
                      std::to_string(o.zipf_exponent));
}

// Draws ids 1..n, the id of popularity rank r with weight (r+1)^-a. Rank r is id
// perm[r], so popular ids are spread over the range rather than being the first ones.
class PopularitySampler {
 public:
  PopularitySampler(std::size_t n, double a, Rng& rng) : cdf_(n), perm_(n) {
    double total = 0;
    for (std::size_t r = 0; r < n; ++r) cdf_[r] = total += std::pow(static_cast<double>(r + 1), -a);
    std::iota(perm_.begin(), perm_.end(), std::uint32_t{1});
    rng.shuffle(std::span<std::uint32_t>(perm_));
  }
  std::uint32_t draw(Rng& rng) const {
    const double u = rng.uniform() * cdf_.back();
    auto r = static_cast<std::size_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    return perm_[std::min(r, cdf_.size() - 1)];
  }

 private:
  std::vector<double> cdf_;
  std::vector<std::uint32_t> perm_;
};

}  // namespace

GeneratedRatings generate_ratings(const RatingsGenerateOptions& o) {
  validate(o);
  Rng rng(o.seed);
  const std::size_t k = o.rank;
  // Entries with variance 1/sqrt(k): each p_j q_j has variance 1/k, p·q variance 1.
  const double scale = std::pow(static_cast<double>(k), -0.25);
  std::vector<double> P((o.users + 1) * k), Q((o.items + 1) * k);  // row 0 unused (ids from 1)
  for (double& x : P) x = rng.normal() * scale;
  for (double& x : Q) x = rng.normal() * scale;
  PopularitySampler users(o.users, o.zipf_exponent, rng), items(o.items, o.zipf_exponent, rng);

  auto draw = [&](std::size_t n, const std::string& name) {
    std::vector<float> ratings(n);
    std::vector<std::uint32_t> u(n), i(n);
    for (std::size_t r = 0; r < n; ++r) {
      u[r] = users.draw(rng);
      i[r] = items.draw(rng);
      double dot = 0;
      for (std::size_t j = 0; j < k; ++j) dot += P[u[r] * k + j] * Q[i[r] * k + j];
      ratings[r] = static_cast<float>(3.0 + dot + o.noise * rng.normal());
    }
    return Dataset::ratings(ratings, u, i, name);
  };
  const std::string name = "generated-ratings(seed=" + std::to_string(o.seed) + ")";
  GeneratedRatings g;
  g.train = draw(o.ratings, name);
  if (o.test_ratings) g.test = draw(o.test_ratings, name + ".test");
  return g;
}

}  // namespace hogwild
