// The gradient path (include/hogwild/gradient.hpp): a step whose gradients land in
// a buffer, followed by apply_gradient, equals the direct serial step bit for bit
// for every built-in model and both optimisers, wherever the step changes each
// coordinate once (rows with disjoint coordinates; no L2 on the dense models'
// weights, whose decay is a second change). Elsewhere the buffer holds each
// coordinate's changes summed: with SGD the same update to rounding, with AdaGrad
// one AdaGrad step on the summed gradient (the direct step of a sparse model
// applies AdaGrad row by row).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "hogwild/gradient.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/rng.hpp"
#include "owned_params.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

// Rows 0-2 touch disjoint features; row 3 shares features 2 and 5 with them.
Dataset sparse_rows(bool multiclass) {
  std::vector<float> labels{1, 0, multiclass ? 2.f : 1.f, 0};
  std::vector<std::uint64_t> off{0, 3, 5, 8, 10};
  std::vector<std::uint32_t> idx{0, 2, 5, 1, 3, 4, 6, 7, 2, 5};
  std::vector<float> val{0.5f, -1.0f, 0.25f, 1.5f, 0.75f, -0.5f, 1.0f, 0.3f, -0.8f, 0.6f};
  return Dataset::sparse(labels, off, idx, val, 8, "sparse");
}

Dataset dense_rows(bool multiclass) {
  return test::gaussian_rows({0, 1, multiclass ? 2.f : 1.f, 1, 0}, 19, 7);
}

// Ratings 0-2: distinct users and items; rating 3 repeats user 1 and item 0.
Dataset ratings() {
  std::vector<float> r{4, 2, 5, 3};
  std::vector<std::uint32_t> users{0, 1, 2, 1}, items{3, 1, 0, 0};
  return Dataset::ratings(r, users, items, "ratings");
}

struct Params {
  test::OwnedParams owned;
  std::vector<std::vector<float>> grad;
  ParamSet set;  // owned's tensors with grad buffers
  Params(const std::vector<TensorSpec>& specs, bool capture) : owned(specs, 11) {
    Rng rng(13);
    for (auto& s : owned.state)  // AdaGrad's accumulators part-way through a run
      for (auto& x : s) x = static_cast<float>(std::fabs(rng.normal()) + 0.1);
    std::vector<ParamSet::Tensor> t = owned.set.tensors();
    for (auto& x : t) {
      auto& g = grad.emplace_back(capture ? x.size : 0, 0.f);
      x.grad = capture ? g.data() : nullptr;
    }
    set = ParamSet(std::move(t));
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / std::max(1e-3, std::fabs(double(a[i]))));
  return worst;
}

Problem problem_of(const Dataset& d, const LabelMap& labels) {
  Problem problem;
  problem.features = d.cols();
  problem.classes = labels.classes();
  problem.layout = d.layout();
  if (d.layout() == Layout::ratings) {
    problem.users = d.users();
    problem.items = d.cols();
    problem.features = std::max(problem.users, problem.items);
    problem.target_mean = 3.5;
  }
  return problem;
}

struct Outcome {
  bool bits = true;       // weights and optimiser state bit-identical
  double relative = 0;    // the largest relative difference
  bool same_loss = true;
  bool grad_zeroed = true;
  // AdaGrad: the largest relative difference between the captured step and one
  // AdaGrad step on the summed gradient g = w0 - (w0 after a direct SGD step, lr 1).
  double from_sum = 0;
};

// One step of `model_name` over `rows`: direct serial, and captured then applied.
Outcome compare(const std::string& model_name, ModelOptions options, const Dataset& d,
                std::vector<std::uint32_t> rows, Optimizer opt) {
  auto direct_model = make_model(model_name, options);
  auto captured_model = make_model(model_name, options);
  const LabelMap labels = LabelMap::fit(direct_model->label_kind(), d, model_name);
  const auto targets = labels.targets(d);
  const Problem problem = problem_of(d, labels);
  direct_model->configure(problem);
  captured_model->configure(problem);
  const auto specs = direct_model->parameters();
  Params direct(specs, false), captured(specs, true);
  const Batch b{&d, targets.data(), rows.data(), rows.size()};
  const float lr = 0.07f;
  const auto o = static_cast<std::uint8_t>(opt);
  const double l1 = direct_model->train_batch({access_index<SerialUpdate>(), o}, b, direct.set, lr);
  const double l2 =
      captured_model->train_batch({access_index<GradientCapture>(), o}, b, captured.set, lr);
  // The capture left the weights alone.
  Params untouched(specs, false);
  for (std::size_t t = 0; t < specs.size(); ++t)
    CHECK(same_bits(captured.owned.store[t], untouched.owned.store[t]));
  apply_gradient(captured.set, opt, lr);
  Outcome out;
  out.same_loss = l1 == l2;
  for (std::size_t t = 0; t < specs.size(); ++t) {
    out.bits = out.bits && same_bits(direct.owned.store[t], captured.owned.store[t]);
    out.relative = std::max(out.relative, max_relative(direct.owned.store[t], captured.owned.store[t]));
    if (opt == Optimizer::adagrad) {
      out.bits = out.bits && same_bits(direct.owned.state[t], captured.owned.state[t]);
      out.relative =
          std::max(out.relative, max_relative(direct.owned.state[t], captured.owned.state[t]));
    }
    for (float g : captured.grad[t]) out.grad_zeroed = out.grad_zeroed && g == 0;
  }
  if (opt == Optimizer::adagrad) {
    auto sgd_model = make_model(model_name, options);
    sgd_model->configure(problem);
    Params sgd(specs, false);
    sgd_model->train_batch({access_index<SerialUpdate>(), 0}, b, sgd.set, 1.f);
    for (std::size_t t = 0; t < specs.size(); ++t)
      for (std::size_t i = 0; i < specs[t].size; ++i) {
        const double g = double(untouched.owned.store[t][i]) - sgd.owned.store[t][i];
        const double G = untouched.owned.state[t][i] + g * g;
        const double w = untouched.owned.store[t][i] - lr * g / (std::sqrt(G) + AdaGrad::eps);
        out.from_sum = std::max(
            out.from_sum, std::fabs(w - captured.owned.store[t][i]) / std::max(1e-3, std::fabs(w)));
      }
  }
  // The step changed something (a capture that took nothing would compare equal
  // only if the direct step did nothing either).
  bool moved = false;
  for (std::size_t t = 0; t < specs.size(); ++t)
    moved = moved || !same_bits(direct.owned.store[t], untouched.owned.store[t]);
  CHECK(moved);
  return out;
}

struct Case {
  std::string model;
  const Dataset* data;
  std::vector<std::uint32_t> exact_rows, shared_rows;
  bool l2_exact;  // L2 is part of each coordinate's one change
};

}  // namespace

TEST_CASE("a step through the gradient path, then applied, is the serial step bit for bit") {
  const Dataset sparse2 = sparse_rows(false), sparse3 = sparse_rows(true);
  const Dataset dense2 = dense_rows(false), dense3 = dense_rows(true), mf = ratings();
  const std::vector<Case> cases{
      {"logistic", &sparse2, {0, 1, 2}, {0, 3}, true},
      {"hinge", &sparse2, {2, 0, 1}, {3, 0}, true},
      {"squared", &sparse2, {0, 1, 2}, {0, 3}, true},
      {"logistic", &dense2, {1}, {0, 1, 2, 3}, false},
      {"softmax", &sparse3, {0, 1, 2}, {0, 1, 2, 3}, true},
      {"softmax", &dense3, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, false},
      {"mlp", &dense3, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, false},
      {"mlp", &sparse3, {0, 1, 2}, {0, 1, 2, 3}, false},
      {"mf", &mf, {0, 1, 2}, {0, 1, 2, 3}, true},
  };
  for (const Case& c : cases) {
    for (Optimizer opt : {Optimizer::sgd, Optimizer::adagrad}) {
      for (float l2 : {0.f, 0.01f}) {
        ModelOptions options;
        options.hidden = {6, 5};
        options.rank = 4;
        options.l2 = l2;
        CAPTURE(c.model);
        CAPTURE(c.data->source());
        CAPTURE(to_string(opt));
        CAPTURE(l2);
        const Outcome exact = compare(c.model, options, *c.data, c.exact_rows, opt);
        CHECK(exact.same_loss);
        CHECK(exact.grad_zeroed);
        if (l2 == 0 || c.l2_exact)
          CHECK(exact.bits);
        else if (opt == Optimizer::sgd)
          CHECK(exact.relative < 1e-5);
        // Rows that share coordinates: the captured changes are summed first.
        const Outcome shared = compare(c.model, options, *c.data, c.shared_rows, opt);
        CHECK(shared.same_loss);
        CHECK(shared.grad_zeroed);
        if (opt == Optimizer::sgd)  // (a sparse row's lazy L2 reads w as the rows before left it)
          CHECK(shared.relative < (l2 == 0 ? 1e-5 : 1e-3));
        else if (l2 == 0)
          CHECK(shared.from_sum < 1e-4);
      }
    }
  }
}

// A parameter server's replica pushes only the keys a model lists (Model::touched):
// every coordinate a captured step changes must be in the list, for each tensor the
// model lists keys for.
TEST_CASE("a model's touched keys hold every coordinate its step changes") {
  const Dataset sparse2 = sparse_rows(false), sparse3 = sparse_rows(true);
  const Dataset dense2 = dense_rows(false), dense3 = dense_rows(true), mf = ratings();
  struct Listed {
    std::string model;
    const Dataset* data;
    std::vector<std::uint32_t> rows;
    std::size_t listed, listed_l2;  // tensors the model lists keys for, without and with L2
    bool partial;  // the lists leave coordinates out (the rows miss features)
  };
  // The MLP lists its first layer's columns of the rows' features, and nothing
  // where L2 changes every weight; softmax its weights of the rows' features, L2 or
  // not (a sparse row's decay touches only those).
  const std::vector<Listed> cases{{"logistic", &sparse2, {0, 3}, 1, 1, true},
                                  {"hinge", &sparse2, {1, 2}, 1, 1, true},
                                  {"squared", &sparse2, {0, 1, 2, 3}, 1, 1, false},
                                  {"logistic", &dense2, {0, 1}, 0, 0, false},
                                  {"softmax", &sparse3, {0, 3}, 1, 1, true},
                                  {"softmax", &dense3, {0, 3}, 0, 0, false},
                                  {"mlp", &sparse3, {0, 1}, 1, 0, true},
                                  {"mlp", &dense3, {0, 1}, 0, 0, false},
                                  {"mf", &mf, {0, 1, 2, 3}, 4, 4, false}};
  for (const Listed& c : cases) {
    for (float l2 : {0.f, 0.01f}) {
      CAPTURE(c.model);
      CAPTURE(c.data->source());
      CAPTURE(l2);
      ModelOptions options;
      options.hidden = {6, 5};
      options.rank = 4;
      options.l2 = l2;
      auto model = make_model(c.model, options);
      const LabelMap labels = LabelMap::fit(model->label_kind(), *c.data, c.model);
      const auto targets = labels.targets(*c.data);
      model->configure(problem_of(*c.data, labels));
      const auto specs = model->parameters();
      Params captured(specs, true);
      const Batch b{c.data, targets.data(), c.rows.data(), c.rows.size()};
      model->train_batch({access_index<GradientCapture>(), 0}, b, captured.set, 0.07f);
      std::size_t listed = 0, missing = 0, changed = 0;
      for (std::size_t t = 0; t < specs.size(); ++t) {
        std::vector<std::uint32_t> keys;
        if (!model->touched(t, b, keys)) continue;
        ++listed;
        std::vector<char> in(specs[t].size, 0);
        for (std::uint32_t k : keys) {
          REQUIRE(k < specs[t].size);
          in[k] = 1;
        }
        if (c.partial) CHECK(std::count(in.begin(), in.end(), 1) < std::ssize(in));
        for (std::size_t k = 0; k < specs[t].size; ++k)
          if (captured.grad[t][k] != 0) {
            ++changed;
            missing += !in[k];
          }
      }
      CHECK(listed == (l2 == 0 ? c.listed : c.listed_l2));
      CHECK(missing == 0);
      if (listed > 0) CHECK(changed > 0);
    }
  }
}
