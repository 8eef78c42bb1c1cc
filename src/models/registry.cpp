#include <algorithm>
#include <map>
#include <mutex>

#include "hogwild/error.hpp"
#include "hogwild/model.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/models/mf.hpp"
#include "hogwild/models/softmax.hpp"

namespace hogwild {

namespace {

std::map<std::string, ModelFactory>& registry() {
  // The built-in models: one line each.
  static std::map<std::string, ModelFactory> r{
      {"logistic", [](const ModelOptions& o) { return std::make_unique<LinearModel>(LinearLoss::logistic, o); }},
      {"hinge", [](const ModelOptions& o) { return std::make_unique<LinearModel>(LinearLoss::hinge, o); }},
      {"squared", [](const ModelOptions& o) { return std::make_unique<LinearModel>(LinearLoss::squared, o); }},
      {"softmax", [](const ModelOptions& o) { return std::make_unique<SoftmaxModel>(o); }},
      {"mlp", [](const ModelOptions& o) { return std::make_unique<MlpModel>(o); }},
      {"mf", [](const ModelOptions& o) { return std::make_unique<MfModel>(o); }},
  };
  return r;
}

std::mutex registry_mutex;

}  // namespace

void register_model(const std::string& name, ModelFactory factory) {
  std::lock_guard g(registry_mutex);
  registry()[name] = std::move(factory);
}

std::vector<std::string> model_names() {
  std::lock_guard g(registry_mutex);
  std::vector<std::string> names;
  for (auto& [n, f] : registry()) names.push_back(n);
  return names;
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& options) {
  std::lock_guard g(registry_mutex);
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (auto& [n, f] : registry()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("unknown model \"" + name + "\"; expected one of: " + known);
  }
  if (options.matmul != MatmulPrecision::fp32 && name != "mlp")
    throw ConfigError("--matmul-precision " + std::string(to_string(options.matmul)) +
                      " applies to --model mlp only (model \"" + name + "\")");
  return it->second(options);
}

MatmulPrecision parse_matmul_precision(const std::string& name) {
  if (name == "fp32") return MatmulPrecision::fp32;
  if (name == "bf16") return MatmulPrecision::bf16;
  throw ConfigError("unknown --matmul-precision \"" + name + "\"; expected fp32 or bf16");
}

const char* to_string(MatmulPrecision p) noexcept {
  return p == MatmulPrecision::bf16 ? "bf16" : "fp32";
}

ParamSnapshot::ParamSnapshot(const ParamSet& live) {
  std::vector<ParamSet::Tensor> t;
  storage_.reserve(live.count());
  for (const auto& src : live.tensors()) {
    auto& dst = storage_.emplace_back(src.size);
    for (std::size_t i = 0; i < src.size; ++i) dst[i] = detail::relaxed_load(src.data + i);
    t.push_back({src.name, dst.data(), src.size});
  }
  view_ = ParamSet(std::move(t));
}

void ParamSnapshot::refresh(const ParamSet& live, const std::vector<Model::Ranges>& ranges) {
  copy_ranges(live, view_, ranges);
}

void copy_ranges(const ParamSet& from, const ParamSet& to,
                 const std::vector<Model::Ranges>& ranges) {
  for (std::size_t t = 0; t < from.count(); ++t) {
    const float* src = from.data(t);  // hoisted: the stores below may alias them
    float* dst = to.data(t);
    const auto copy = [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) dst[i] = detail::relaxed_load(src + i);
    };
    if (t >= ranges.size() || ranges[t].empty())
      copy(0, from.size(t));
    else
      for (const auto& [begin, end] : ranges[t]) copy(begin, end);
  }
}

Model::Ranges coalesce_ranges(const Model::Ranges& ranges, std::size_t gap) {
  Model::Ranges out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first - out.back().second < gap)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace hogwild
