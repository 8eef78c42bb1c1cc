// Synthetic sparse data with the two properties that decide how Hogwild scales:
// power-law feature popularity (a few hot coordinates touched by most rows) and a
// learnable but noisy label. The random stream is our own (hogwild::Rng:
// splitmix64 seeding xoshiro256**; no std:: distributions, whose algorithms differ
// between standard libraries), so a seed names the same dataset everywhere. Popularities and the
// logistic link go through libm (pow, exp); a last-ulp difference there could only
// matter when a uniform draw lands within one ulp of a boundary.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>

#include "data/file_io.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/rng.hpp"

namespace hogwild {

namespace {

// The two draws of this generator's stream, kept as the data sets it has written
// were drawn: an index as floor(uniform * n) (Rng::below is Lemire's, another
// stream), and a normal as Irwin-Hall's sum of 12 uniforms minus 6 (mean 0,
// variance 1, close enough for hidden weights, and no libm call).
std::size_t scaled_below(Rng& rng, std::size_t n) {
  return static_cast<std::size_t>(rng.uniform() * static_cast<double>(n));
}
double irwin_hall_normal(Rng& rng) {
  double s = -6.0;
  for (int i = 0; i < 12; ++i) s += rng.uniform();
  return s;
}

void validate(const GenerateOptions& o) {
  if (o.rows == 0) throw ConfigError("generate: rows must be at least 1");
  if (o.features == 0 || o.features > std::numeric_limits<std::uint32_t>::max())
    throw ConfigError("generate: features must be between 1 and 4294967295, not " +
                      std::to_string(o.features));
  if (o.nnz_per_row == 0 || o.nnz_per_row > o.features)
    throw ConfigError("generate: nnz per row must be between 1 and features (" +
                      std::to_string(o.features) + "), not " + std::to_string(o.nnz_per_row));
  if (o.rows > std::numeric_limits<std::size_t>::max() / sizeof(float) / o.nnz_per_row)
    throw ConfigError("generate: rows * nnz per row is too large");
  if (!(o.noise >= 0.0 && o.noise <= 0.5))
    throw ConfigError("generate: noise must be between 0 and 0.5, not " + std::to_string(o.noise));
  if (!(o.zipf_exponent >= 0.0 && o.zipf_exponent <= 10.0))
    throw ConfigError("generate: the Zipf exponent must be between 0 and 10, not " +
                      std::to_string(o.zipf_exponent));
}

// Draws `k` distinct features per row, feature of popularity rank r with weight
// (r+1)^-a. Rank r is feature perm[r], so hot features are spread over the index
// range as in hashed real data, not packed at the start.
class FeatureSampler {
 public:
  FeatureSampler(const GenerateOptions& o, Rng& rng)
      : a_(o.zipf_exponent), cdf_(o.features), perm_(o.features), stamp_(o.features, 0) {
    double total = 0;
    for (std::size_t r = 0; r < o.features; ++r) cdf_[r] = total += weight(r);
    std::iota(perm_.begin(), perm_.end(), std::uint32_t{0});
    for (std::size_t i = o.features; i > 1; --i)
      std::swap(perm_[i - 1], perm_[scaled_below(rng, i)]);
  }

  // Fills `out` with k distinct ranks' features, sorted ascending.
  void draw(std::size_t k, Rng& rng, std::vector<std::uint32_t>& out) {
    ++row_;
    out.clear();
    // Rejection of repeats is fast while the row's features hold little of the total
    // weight; with a steep exponent or k close to features it is not, and the rest of
    // the row is drawn exactly, in one O(features) pass (Efraimidis-Spirakis keys).
    const std::size_t budget = 16 * k + 64;
    for (std::size_t tries = 0; out.size() < k && tries < budget; ++tries) {
      double u = rng.uniform() * cdf_.back();
      auto r =
          static_cast<std::size_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
      r = std::min(r, cdf_.size() - 1);
      if (stamp_[r] == row_) continue;
      stamp_[r] = row_;
      out.push_back(perm_[r]);
    }
    if (out.size() < k) draw_rest(k - out.size(), rng, out);
    std::sort(out.begin(), out.end());
  }

 private:
  double weight(std::size_t r) const { return std::pow(static_cast<double>(r + 1), -a_); }

  void draw_rest(std::size_t m, Rng& rng, std::vector<std::uint32_t>& out) {
    keys_.clear();
    for (std::size_t r = 0; r < cdf_.size(); ++r) {
      double u = rng.uniform();
      if (stamp_[r] != row_) keys_.emplace_back(std::log1p(-u) / weight(r), r);  // larger wins
    }
    std::nth_element(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(m - 1), keys_.end(),
                     std::greater<>());
    for (std::size_t i = 0; i < m; ++i) out.push_back(perm_[keys_[i].second]);
  }

  double a_;
  std::vector<double> cdf_;
  std::vector<std::uint32_t> perm_;
  std::vector<std::uint64_t> stamp_;  // stamp_[r] == row_: rank r is already in this row
  std::uint64_t row_ = 0;
  std::vector<std::pair<double, std::size_t>> keys_;
};

}  // namespace

Dataset generate_sparse(const GenerateOptions& o) {
  validate(o);
  Rng rng(o.seed);
  FeatureSampler sampler(o, rng);
  std::vector<double> w(o.features);  // the hidden model
  for (double& x : w) x = irwin_hall_normal(rng);

  const float value = static_cast<float>(1.0 / std::sqrt(static_cast<double>(o.nnz_per_row)));
  std::vector<float> labels(o.rows), values(o.rows * o.nnz_per_row, value);
  std::vector<std::uint64_t> offsets(o.rows + 1);
  std::vector<std::uint32_t> indices;
  indices.reserve(o.rows * o.nnz_per_row);
  std::vector<std::uint32_t> row;
  for (std::size_t r = 0; r < o.rows; ++r) {
    sampler.draw(o.nnz_per_row, rng, row);
    double margin = 0;
    for (std::uint32_t j : row) margin += w[j] * value;
    // Both draws happen on every row, so the stream does not depend on `noise`.
    const double u = rng.uniform(), flip = rng.uniform();
    bool y = u < 1.0 / (1.0 + std::exp(-4.0 * margin));
    if (flip < o.noise) y = !y;
    labels[r] = y ? 1.0f : 0.0f;
    indices.insert(indices.end(), row.begin(), row.end());
    offsets[r + 1] = indices.size();
  }
  return Dataset::sparse(labels, offsets, indices, values, o.features,
                         "generated(seed=" + std::to_string(o.seed) + ")");
}

void write_libsvm(const Dataset& d, const std::string& path) {
  detail::TextWriter out(path);
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const float y = d.label(r);
    if (y == std::trunc(y) && std::fabs(y) < 1e15f)
      out.number(static_cast<long long>(y));
    else
      out.number(y);
    RowView row = d.row(r);
    for (std::uint32_t i = 0; i < row.nnz; ++i) {
      // Dense rows list their non-zero pixels; sparse rows keep explicit zeros.
      const float v = row.at(i);  // a dense_u8 pixel as byte_value: what widened() holds
      if (row.dense() && v == 0.0f) continue;
      out.put(' ').number((row.dense() ? i : row.index[i]) + std::uint64_t{1});
      out.put(':').number(v);
    }
    out.end_line();
  }
  out.commit();
}

}  // namespace hogwild
