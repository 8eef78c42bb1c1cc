#include <algorithm>
#include <map>
#include <mutex>

#include "hogwild/error.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/models/mf.hpp"
#include "hogwild/models/softmax.hpp"
#include "models/registry.hpp"

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
bool g_added = false;  // a program registered a model of its own

}  // namespace

namespace detail {

bool models_added() {
  std::lock_guard g(registry_mutex);
  return g_added;
}

}  // namespace detail

void register_model(const std::string& name, ModelFactory factory) {
  std::lock_guard g(registry_mutex);
  registry()[name] = std::move(factory);
  g_added = true;
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
  if (options.factors != Dtype::f32 && name != "mf")
    throw ConfigError("--factors " + std::string(to_string(options.factors)) +
                      " applies to --model mf only (model \"" + name + "\")");
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

}  // namespace hogwild
