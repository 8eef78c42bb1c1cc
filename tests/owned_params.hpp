// Parameters for calling a model's step directly, outside the trainer: one private
// vector per TensorSpec (normal values, the spec's own scale or 0.3 where it has
// none) and a zeroed optimiser-state vector beside each, bound as a ParamSet; and
// the batch loss the gradient tests differentiate.
#pragma once

#include <cstdint>
#include <vector>

#include "hogwild/param_set.hpp"
#include "hogwild/rng.hpp"

namespace hogwild::test {

struct OwnedParams {
  std::vector<std::vector<float>> store, state;
  ParamSet set;
  OwnedParams(const std::vector<TensorSpec>& specs, std::uint64_t seed) {
    Rng rng(seed);
    for (auto& s : specs) {
      auto& v = store.emplace_back(s.size);
      const double scale = s.init.scale > 0 ? s.init.scale : 0.3;
      for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
      state.emplace_back(s.size, 0.f);
    }
    bind(names_of(specs));
  }
  OwnedParams(const OwnedParams& o) : store(o.store), state(o.state) {
    std::vector<std::string> names;
    for (auto& t : o.set.tensors()) names.push_back(t.name);
    bind(names);
  }
  OwnedParams& operator=(const OwnedParams&) = delete;

 private:
  static std::vector<std::string> names_of(const std::vector<TensorSpec>& specs) {
    std::vector<std::string> names;
    for (auto& s : specs) names.push_back(s.name);
    return names;
  }
  void bind(const std::vector<std::string>& names) {
    std::vector<ParamSet::Tensor> t;
    for (std::size_t i = 0; i < names.size(); ++i)
      t.push_back({names[i], store[i].data(), store[i].size(), state[i].data()});
    set = ParamSet(std::move(t));
  }
};

// Mean loss of a batch under `p`, as the model's predict computes it: the objective
// whose finite differences the gradient tests compare with a step.
template <class M>
double batch_loss(const M& m, const ParamSet& p, const Batch& b) {
  double total = 0;
  for (std::size_t i = 0; i < b.size; ++i) {
    double l;
    bool ok;
    m.predict(p, b.row(i), b.target(i), l, ok);
    total += l;
  }
  return total / static_cast<double>(b.size);
}

}  // namespace hogwild::test
