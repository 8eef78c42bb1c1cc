// Between a Run and a model file: --save-model (from the arena) and --init-from
// (into it, before any worker starts).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "hogwild/model_file.hpp"
#include "hogwild/options.hpp"
#include "trainer/run.hpp"

namespace hogwild::detail {

namespace {

std::vector<std::uint64_t> shape_of(const TensorSpec& s) {
  if (s.shape.empty()) return {s.size};
  return {s.shape.begin(), s.shape.end()};
}

}  // namespace

void Run::write_model(const std::string& path, unsigned epochs) const {
  ModelDescription d;
  d.model = model.name();
  for (const OptionInfo& o : train_options())
    if (o.concern == Concern::model && o.name != "model") d.options[o.name] = o.get(cfg);
  d.problem = problem;
  d.labels = labels;
  d.outputs = model.outputs();
  d.output = d.outputs == 0 ? "none" : output_kind(d.outputs, labels);
  d.data = data_fingerprint();
  d.epochs = epochs;
  std::vector<ShapedTensor> tensors;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ParamSet::Tensor& t = params.tensor(i);
    tensors.push_back({{t.name, t.size,
                        [&t](std::size_t begin, std::size_t n, float* out) {
                          read_values(t.space, t.dtype, t.data, begin, n, out);
                        }},
                       specs[i].shape, t.dtype == Dtype::f16});
  }
  write_model_file(d, tensors, path);
}

void Run::init_from_model(const std::string& path) {
  const ModelFileHeader header = read_model_header(path);
  const ModelDescription d = describe_model(header, path);
  auto refuse = [&](const std::string& why) {
    return ConfigError(fmt::format("--init-from {}: {}", path, why));
  };
  if (d.model != model.name())
    throw refuse(fmt::format("it holds model {}, and this run trains {}", d.model, model.name()));
  // The same labels in the same places: a class's weights must go on meaning it.
  if (d.labels.kind() != labels.kind() || d.labels.values() != labels.values())
    throw refuse(fmt::format("its labels are {}, and this run's training data has {}",
                             fmt::join(d.labels.values(), " "), fmt::join(labels.values(), " ")));
  if (header.tensors.size() != specs.size())
    throw refuse(fmt::format("it holds {} tensors, and model {} here has {} (--no-bias?)",
                             header.tensors.size(), model.name(), specs.size()));
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto it = std::find_if(header.tensors.begin(), header.tensors.end(),
                                 [&](const auto& t) { return t.name == specs[i].name; });
    if (it == header.tensors.end())
      throw refuse(fmt::format("it has no tensor \"{}\"", specs[i].name));
    if (it->shape != shape_of(specs[i]))
      throw refuse(fmt::format("its tensor {} has shape {}, and this run's {} (the data's "
                               "features, classes or ids, or the model's options differ)",
                               it->name, it->shape, shape_of(specs[i])));
    const std::vector<float> values = read_model_tensor(header, *it);
    const auto bad = std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
    if (bad != values.end())
      throw refuse(fmt::format("its tensor {}[{}] is {}", it->name, bad - values.begin(), *bad));
    const ParamSet::Tensor& t = params.tensor(i);
    write_values(t.space, t.dtype, t.data, 0, values.data(), values.size());
  }
}

}  // namespace hogwild::detail
