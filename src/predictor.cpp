// Predicting with a saved model (hogwild/predictor.hpp).
#include "hogwild/predictor.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hogwild/error.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/options.hpp"
#include "hogwild/trainer.hpp"

namespace hogwild {

namespace {

constexpr std::size_t kBlock = 256;  // rows a task predicts at once (the MLP's batch)

// The area under the ROC curve: the chance that a positive row scores above a
// negative one, ties counting half (Mann-Whitney U from the ranks).
// A float's bits as an unsigned key that sorts as the floats do (negatives flipped).
std::uint32_t sortable(float x) noexcept {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}

double auc(const std::vector<float>& score, const std::vector<float>& target) {
  // Each row as (score key << 1 | positive), sorted by an LSD radix sort of 3 passes
  // of 11 bits (the 33 bits): linear in the rows, where a comparison sort was most
  // of an evaluation's time.
  const std::size_t n = score.size();
  std::vector<std::uint64_t> keys(n), scratch(n);
  for (std::size_t r = 0; r < n; ++r)
    keys[r] = std::uint64_t{sortable(score[r])} << 1 | (target[r] > 0.5f ? 1u : 0u);
  for (unsigned shift = 0; shift < 33; shift += 11) {
    std::array<std::size_t, 2049> at{};
    for (auto k : keys) ++at[((k >> shift) & 2047) + 1];
    for (std::size_t b = 1; b < at.size(); ++b) at[b] += at[b - 1];
    for (auto k : keys) scratch[at[(k >> shift) & 2047]++] = k;
    keys.swap(scratch);
  }
  double positive_ranks = 0, positives = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i, here = 0;
    for (; j < n && keys[j] >> 1 == keys[i] >> 1; ++j) here += keys[j] & 1;
    const double rank = (static_cast<double>(i + j) + 1) / 2;  // the tie's mean rank, from 1
    positive_ranks += rank * static_cast<double>(here);
    positives += static_cast<double>(here);
    i = j;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0 || negatives == 0) return std::nan("");
  return (positive_ranks - positives * (positives + 1) / 2) / (positives * negatives);
}

}  // namespace

void Predictor::Free::operator()(float* p) const noexcept { std::free(p); }

Predictor::Predictor(ModelDescription description, std::unique_ptr<Model> model,
                     const std::vector<std::vector<float>>& weights)
    : d_(std::move(description)), model_(std::move(model)) {
  output_ = d_.output == "probabilities" ? Output::probabilities
            : d_.output == "score"       ? Output::score
                                         : Output::value;
  const auto specs = model_->parameters();
  HOGWILD_ENFORCE_EQ(specs.size(), weights.size());
  std::vector<ParamSet::Tensor> tensors;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    HOGWILD_ENFORCE_EQ(specs[i].size, weights[i].size());
    const std::size_t bytes = (std::max<std::size_t>(1, weights[i].size()) * sizeof(float) + 63) / 64 * 64;
    auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (p == nullptr) throw ResourceError(fmt::format("cannot allocate {} bytes of weights", bytes));
    owned_.emplace_back(p);
    std::copy(weights[i].begin(), weights[i].end(), p);
    tensors.push_back({specs[i].name, p, weights[i].size()});
  }
  params_ = ParamSet(std::move(tensors));
}

Predictor::Predictor(Predictor&&) noexcept = default;
Predictor& Predictor::operator=(Predictor&&) noexcept = default;
Predictor::~Predictor() = default;

Dataset Predictor::prepare(const Dataset& data) const {
  const Problem& p = d_.problem;
  const bool ratings = p.layout == Layout::ratings;
  if (ratings != (data.layout() == Layout::ratings))
    throw ConfigError(fmt::format("model {} was trained on {} rows, and {} holds {} rows",
                                  d_.model, to_string(p.layout), data.source(),
                                  to_string(data.layout())));
  if (ratings) return data;
  if (p.layout == Layout::dense || p.layout == Layout::dense_u8) {
    // Rows of the model's features: a missing column is a zero, an extra one a
    // feature it never saw.
    Dataset dense = data.dense() && data.cols() == p.features ? data : data.densified(p.features);
    return model_->reads_byte_rows() ? dense : dense.widened();
  }
  const Dataset sparse = data.sparsified();
  if (sparse.cols() <= p.features) return sparse;
  // Features past the model's: dropped (their weights would be zero had it seen them).
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  for (std::size_t r = 0; r < sparse.rows(); ++r) {
    const RowView x = sparse.row(r);
    for (std::uint32_t k = 0; k < x.nnz; ++k)
      if (x.index[k] < p.features) indices.push_back(x.index[k]), values.push_back(x.value[k]);
    offsets.push_back(indices.size());
  }
  return Dataset::sparse(sparse.labels(), offsets, indices, values, p.features, sparse.source());
}

float Predictor::label_of(std::span<const float> out) const noexcept {
  if (output_ == Output::value) return out[0];
  if (output_ == Output::score) return d_.labels.label_of(out[0] > 0 ? 1 : 0);
  return d_.labels.label_of(
      static_cast<std::size_t>(std::max_element(out.begin(), out.end()) - out.begin()));
}

float Predictor::predict(RowView row, std::span<float> out) const {
  std::vector<float> mine;
  if (out.size() < outputs()) {
    mine.resize(outputs());
    out = mine;
  }
  model_->predict_rows(params_, std::span<const RowView>(&row, 1), out.data());
  return label_of(out.first(outputs()));
}

void Predictor::for_blocks(const Dataset& data,
                           const std::function<void(std::size_t, std::size_t, const float*)>& f) const {
  // Blocks b = rows [b kBlock, (b + 1) kBlock): the same blocks however the work
  // is split among the threads (a block's sums are its own, evaluate's included).
  const std::size_t k = d_.outputs, count = (data.rows() + kBlock - 1) / kBlock;
  auto blocks = [&](std::size_t first, std::size_t last) {
    std::vector<RowView> rows;
    std::vector<float> out;
    for (std::size_t b = first; b < last; ++b) {
      const std::size_t r0 = b * kBlock, n = std::min(kBlock, data.rows() - r0);
      rows.clear();
      for (std::size_t r = r0; r < r0 + n; ++r) rows.push_back(data.row(r));
      out.resize(n * k);
      model_->predict_rows(params_, rows, out.data());
      f(r0, n, out.data());
    }
  };
  if (count <= 4) return blocks(0, count);
  // One thread per core this process may run on, each taking the next block until
  // none is left, joined before returning (no pool outlives the call: a program may
  // fork after it). The first exception (a model's) stops the others and is rethrown.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int allowed = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  const auto threads = static_cast<unsigned>(std::clamp<std::size_t>(allowed, 1, count));
  std::atomic<std::size_t> next{0};
  std::mutex failed;
  std::exception_ptr error;
  auto work = [&] {
    try {
      for (std::size_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < count;) blocks(b, b + 1);
    } catch (...) {
      const std::lock_guard hold(failed);
      if (!error) error = std::current_exception();
      next.store(count, std::memory_order_relaxed);
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
  }  // joined
  if (error) std::rethrow_exception(error);
}

void Predictor::predict(const Dataset& data, std::span<float> labels, std::span<float> outputs) const {
  HOGWILD_ENFORCE_LE(data.rows(), labels.size());
  const std::size_t k = d_.outputs;
  if (!outputs.empty()) HOGWILD_ENFORCE_LE(data.rows() * k, outputs.size());
  for_blocks(data, [&](std::size_t r0, std::size_t n, const float* out) {
    for (std::size_t i = 0; i < n; ++i) labels[r0 + i] = label_of({out + i * k, k});
    if (!outputs.empty()) std::copy(out, out + n * k, outputs.data() + r0 * k);
  });
}

PredictionMetrics Predictor::evaluate(const Dataset& data) const {
  PredictionMetrics m;
  m.rows = data.rows();
  if (data.rows() == 0) return m;
  const std::vector<float> targets = d_.labels.targets(data);
  const std::size_t k = d_.outputs;
  const bool binary = d_.labels.kind() == LabelKind::binary;
  // Each block's sums, added in block order (the same metrics whatever the threads
  // did); a binary model's score of each row, for the AUC.
  struct Sums {
    double correct = 0, loss = 0, se = 0, ae = 0;
  };
  std::vector<Sums> sums((data.rows() + kBlock - 1) / kBlock);
  std::vector<float> positive(binary ? data.rows() : 0);
  for_blocks(data, [&](std::size_t r0, std::size_t n, const float* out) {
    Sums& s = sums[r0 / kBlock];
    for (std::size_t i = 0; i < n; ++i) {
      const float* o = out + i * k;
      const float t = targets[r0 + i];
      if (output_ == Output::value) {
        const double e = static_cast<double>(o[0]) - t;
        s.se += e * e;
        s.ae += std::abs(e);
        continue;
      }
      const auto y = static_cast<std::size_t>(t);
      if (output_ == Output::score) {
        s.correct += (o[0] > 0) == (y == 1);
      } else {
        s.correct += static_cast<std::size_t>(std::max_element(o, o + k) - o) == y;
        s.loss -= std::log(std::max(static_cast<double>(o[y]), 1e-300));
      }
      if (binary) positive[r0 + i] = o[k - 1];
    }
  });
  Sums all;
  for (const Sums& s : sums) all.correct += s.correct, all.loss += s.loss, all.se += s.se, all.ae += s.ae;
  const double n = static_cast<double>(data.rows());
  if (output_ == Output::value) {
    m.rmse = std::sqrt(all.se / n);
    m.mae = all.ae / n;
    return m;
  }
  m.accuracy = all.correct / n;
  if (output_ == Output::probabilities) m.log_loss = all.loss / n;
  if (binary) m.auc = auc(positive, targets);
  return m;
}

Predictor load_model(const std::string& file) {
  const ModelFileHeader header = read_model_header(file);
  const std::string& path = header.name;
  ModelDescription d = describe_model(header, path);
  const auto names = model_names();
  if (std::find(names.begin(), names.end(), d.model) == names.end())
    throw ConfigError(fmt::format("model file {} holds model \"{}\", which this program does not "
                                  "have (it has {}; a model of your own is registered with "
                                  "register_model before load_model)",
                                  path, d.model, fmt::join(names, ", ")));
  TrainConfig config;
  for (const auto& [name, value] : d.options) {
    const OptionInfo* o = find_option(name);
    if (o == nullptr || o->concern != Concern::model)
      throw ConfigError(fmt::format("model file {}: \"{}\" is not a model option of this hogwild",
                                    path, name));
    set_option(config, name, value);
  }
  // The weights are floats in the file, and predictions run in fp32 (as the
  // trainer's evaluations): fp16 factors and bf16 products were training's.
  config.model_options.factors = Dtype::f32;
  config.model_options.matmul = MatmulPrecision::fp32;
  auto model = make_model(d.model, config.model_options);
  model->configure(d.problem);
  // What the metadata says of the predictions must be what this model, configured
  // from it, makes: a file edited or written by another program is refused here,
  // not read past its tensors.
  const LabelKind kind = model->label_kind();
  const bool kind_fits = kind == LabelKind::binary_or_real
                             ? d.labels.kind() == LabelKind::binary || d.labels.kind() == LabelKind::real
                             : d.labels.kind() == kind;
  const std::string output = model->outputs() == 0 ? "none" : output_kind(model->outputs(), d.labels);
  if (!kind_fits || d.labels.classes() != d.problem.classes || model->outputs() != d.outputs ||
      d.output != output)
    throw DataError(path, 0, fmt::format(
        "its metadata does not fit model {}: labels {} ({} classes, {} label values), {} outputs "
        "({}), where the model configured from it predicts {} ({})",
        d.model, d.labels.kind() == LabelKind::multiclass ? "multiclass" : d.labels.kind() == LabelKind::binary ? "binary" : "real",
        d.problem.classes, d.labels.values().size(), d.outputs, d.output, model->outputs(), output));
  std::vector<std::vector<float>> weights;
  std::vector<std::string> expected;
  for (const TensorSpec& s : model->parameters()) {
    const std::vector<std::uint64_t> shape =
        s.shape.empty() ? std::vector<std::uint64_t>{s.size}
                        : std::vector<std::uint64_t>(s.shape.begin(), s.shape.end());
    expected.push_back(fmt::format("{} {}", s.name, shape));
    const auto it = std::find_if(header.tensors.begin(), header.tensors.end(),
                                 [&](const auto& t) { return t.name == s.name; });
    if (it == header.tensors.end() || it->shape != shape)
      throw ConfigError(fmt::format(
          "model file {}: model {} as its metadata configures it has tensors {}; the file {}",
          path, d.model, fmt::join(expected, ", "),
          it == header.tensors.end() ? fmt::format("has no \"{}\"", s.name)
                                     : fmt::format("has {} {}", it->name, it->shape)));
    weights.push_back(read_model_tensor(header, *it));
    const auto bad = std::find_if(weights.back().begin(), weights.back().end(),
                                  [](float x) { return !std::isfinite(x); });
    if (bad != weights.back().end())
      throw DataError(path, 0, fmt::format("tensor {}[{}] is {}: a model with non-finite weights "
                                           "predicts nothing", s.name, bad - weights.back().begin(), *bad));
  }
  if (header.tensors.size() != weights.size())
    throw ConfigError(fmt::format("model file {} holds {} tensors, model {} has {}", path,
                                  header.tensors.size(), d.model, weights.size()));
  return Predictor(std::move(d), std::move(model), weights);
}

}  // namespace hogwild
