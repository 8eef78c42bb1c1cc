// The model registry: every built-in model registers itself here; users may add
// theirs and then name them with --model (or through TrainConfig::model).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hogwild/model.hpp"
#include "hogwild/model_options.hpp"

namespace hogwild {

using ModelFactory = std::function<std::unique_ptr<Model>(const ModelOptions&)>;

void register_model(const std::string& name, ModelFactory factory);
std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& options = {});
std::vector<std::string> model_names();

}  // namespace hogwild
