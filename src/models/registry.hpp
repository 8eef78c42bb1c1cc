// The trainer's side of the model registry (hogwild/model_registry.hpp).
#pragma once

namespace hogwild::detail {

// Whether the program registered a model of its own (a fork server that is a
// program of its own would not know it).
bool models_added();

}  // namespace hogwild::detail
