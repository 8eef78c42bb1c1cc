#include "hogwild/models/mf.hpp"

#include "hogwild/error.hpp"

namespace hogwild {

MfModel::MfModel(const ModelOptions& options) : options_(options), rank_(options.rank) {
  if (rank_ < 1 || rank_ > kMaxRank)
    throw ConfigError("--rank must be between 1 and " + std::to_string(kMaxRank) + ", not " +
                      std::to_string(rank_));
}

void MfModel::configure(const Problem& problem) {
  if (problem.layout != Layout::ratings)
    throw ConfigError(std::string("model mf needs rating triples (\"user item rating\" lines, "
                                  "e.g. MovieLens u.data or ratings.csv), not ") +
                      to_string(problem.layout) + " rows");
  users_ = problem.users;
  items_ = problem.items;
  mean_ = static_cast<float>(problem.target_mean);
}

std::vector<TensorSpec> MfModel::parameters() const {
  // sd 0.1 whatever the rank: p·q starts near 0 yet the factors are large enough
  // for the first gradients (err * q) to break the symmetry quickly.
  const Init init{Init::normal, 0.1f};
  std::vector<TensorSpec> t{{"P", users_ * rank_, init, options_.factors, {users_, rank_}},
                            {"Q", items_ * rank_, init, options_.factors, {items_, rank_}}};
  if (options_.bias) {
    t.push_back({"bu", users_, {}});
    t.push_back({"bi", items_, {}});
  }
  return t;
}

template <class U>
double MfModel::step(const Batch& b, const ParamSet& p, float lr) {
  const float* P = p.data(0);
  const float* Q = p.data(1);
  const float* bu = options_.bias ? p.data(2) : nullptr;
  const float* bi = options_.bias ? p.data(3) : nullptr;
  const std::size_t k = rank_;
  read_.resize(b.size * 2 * k);
  err_.resize(b.size);
  grad_.resize(2 * k);
  double total = 0;
  // Every error at the weights as read now; the copies feed the update below, so a
  // rating's gradient uses one consistent read even while other workers write.
  for (std::size_t n = 0; n < b.size; ++n) {
    const RowView x = b.row(n);
    const std::size_t u = x.index[0], i = x.index[1];
    float* pu = read_.data() + 2 * k * n;
    float* qi = pu + k;
    float z = mean_;
    for (std::size_t j = 0; j < k; ++j) {
      pu[j] = U::read(P + u * k + j);
      qi[j] = U::read(Q + i * k + j);
      z += pu[j] * qi[j];
    }
    if (bu) z += U::read(bu + u) + U::read(bi + i);
    const float e = z - b.target(n);
    err_[n] = e;
    total += 0.5 * static_cast<double>(e) * e;
  }
  // Gradient of the batch's mean loss, L2 included, applied rating by rating
  // through the optimiser (SGD: w -= lr g; AdaGrad: per-coordinate scaling).
  const float inv = 1 / static_cast<float>(b.size), l2 = options_.l2;
  float* gp = grad_.data();
  float* gq = gp + k;
  for (std::size_t n = 0; n < b.size; ++n) {
    const RowView x = b.row(n);
    const std::size_t u = x.index[0], i = x.index[1];
    const float* pu = read_.data() + 2 * k * n;
    const float* qi = pu + k;
    const float e = err_[n];
    for (std::size_t j = 0; j < k; ++j) {
      gp[j] = e * qi[j] + l2 * pu[j];
      gq[j] = e * pu[j] + l2 * qi[j];
    }
    U::descend_axpy(p[0], u * k, inv, gp, k, lr);
    U::descend_axpy(p[1], i * k, inv, gq, k, lr);
    if (bu) {
      U::descend(p[2], u, e * inv, lr);
      U::descend(p[3], i, e * inv, lr);
    }
  }
  return total;
}

bool MfModel::touched(std::size_t tensor, const Batch& b,
                      std::vector<std::uint32_t>& keys) const {
  if (tensor > 3) return false;
  const std::size_t k = tensor < 2 ? rank_ : 1;
  for (std::size_t n = 0; n < b.size; ++n) {
    const RowView x = b.row(n);
    const std::size_t id = x.index[tensor % 2];  // P, bu: the user; Q, bi: the item
    if (id >= (tensor % 2 == 0 ? users_ : items_)) continue;
    for (std::size_t j = 0; j < k; ++j) keys.push_back(static_cast<std::uint32_t>(id * k + j));
  }
  return true;
}

float MfModel::rating(const ParamSet& p, RowView x) const noexcept {
  const std::size_t u = x.index[0], i = x.index[1], k = rank_;
  float z = mean_;
  // An id beyond the tables (a dataset the model was not configured for) is an
  // unknown user or item: mean and whatever bias is known.
  const bool known_u = u < users_, known_i = i < items_;
  if (known_u && known_i) z += SerialUpdate::dot(p.data(0) + u * k, p.data(1) + i * k, k);
  if (options_.bias) z += (known_u ? p.data(2)[u] : 0.f) + (known_i ? p.data(3)[i] : 0.f);
  return z;
}

void MfModel::predict_rows(const ParamSet& p, std::span<const RowView> rows, float* out) const {
  for (const RowView& x : rows) *out++ = rating(p, x);
}

void MfModel::predict(const ParamSet& p, RowView x, float target, double& loss,
                      bool& correct) const {
  const double e = static_cast<double>(rating(p, x)) - target;
  loss = 0.5 * e * e;
  correct = false;
}

HOGWILD_INSTANTIATE_STEP(MfModel);

}  // namespace hogwild
