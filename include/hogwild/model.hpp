// A model: named parameter tensors, their initialisation, a gradient step and an
// evaluation. The library owns everything else (the tensor store, workers,
// partitions, the step loop, modes, metrics). Built-in models and user-defined
// ones use exactly this interface; model_base.hpp is the CRTP helper that compiles
// one templated `step` for every access policy, model_registry.hpp names them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hogwild/batch.hpp"
#include "hogwild/dataset.hpp"
#include "hogwild/param_set.hpp"
#include "hogwild/problem.hpp"

namespace hogwild {

// Which compilation of a model's step a batch runs: `access` is the policy's index
// in HOGWILD_ACCESS_POLICIES (update_policy.hpp; access_index<P>() in
// model_base.hpp), `optimizer` an Optimizer (optimizer.hpp). A mode picks it.
struct StepKind {
  std::uint8_t access = 0;
  std::uint8_t optimizer = 0;
};

// ConfigError unless `problem` is of feature rows (sparse, dense or bytes): a model of
// features (linear, softmax, mlp) given rating triples would read the user and item
// ids as features of one space, where user 1 with item 2 is user 2 with item 1.
void require_feature_rows(const std::string& model, const Problem& problem);

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  virtual LabelKind label_kind() const = 0;
  // Called once, by the parent, after the problem is known and before parameters().
  virtual void configure(const Problem& problem) = 0;
  virtual std::vector<TensorSpec> parameters() const = 0;
  // One mini-batch's gradient step, compiled for `kind`; returns the batch's summed
  // training loss, each example's computed before its own update.
  virtual double train_batch(StepKind kind, const Batch& batch, const ParamSet& params,
                             float lr) = 0;
  // True for a model whose step reads scattered parameter rows that a data row
  // names (MF's two factor rows): the step loop then asks for those of the next
  // batch's first row (prefetch_params) while this batch computes.
  virtual bool prefetches_params() const noexcept { return false; }
  virtual void prefetch_params(const ParamSet&, RowView) const noexcept {}
  // What one worker's model holds for its steps beside the parameters, for the run's
  // memory estimate and its address-space check (memory_estimate.hpp): `resident`,
  // the buffers it keeps, sized by the batch and the model (activations, and with
  // `live`, weights that other workers write meanwhile, a private copy of them);
  // `mapped`, the address space its steps may map at once (a library's transient
  // buffers too, at least `resident`). A model that holds little may leave both 0.
  struct StepMemory {
    std::size_t resident = 0, mapped = 0;
  };
  virtual StepMemory step_memory(std::size_t /*batch*/, bool /*live*/) const { return {}; }
  // Per-worker hooks around each epoch's batches, called in the worker process (so
  // a model's members are private to it there): `rows` are the worker's rows of
  // the epoch, in order. end_epoch runs also when the epoch was cut short.
  virtual void begin_epoch(std::span<const std::uint32_t> /*rows*/) {}
  virtual void end_epoch() {}
  virtual Evaluation evaluate(const ParamSet& params, const Dataset& data,
                              const float* targets) const = 0;
  // Per-row predictions (hogwild_predict, Predictor in predictor.hpp). outputs():
  // how many values predict_rows writes per row: the class probabilities (binary,
  // P(negative) and P(positive); multiclass, one per class, in the order of the
  // sorted training labels), or one value: a binary model's score (the positive
  // class above 0) or a regression's prediction. 0: the model does not predict rows.
  virtual std::size_t outputs() const { return 0; }
  // Rows `rows` into out[r * outputs() + k]. Their sparse feature indices are below
  // the Problem's features (the caller drops the others) and dense rows have its
  // features; a ratings row's ids may exceed the tables (unknown user or item).
  virtual void predict_rows(const ParamSet& params, std::span<const RowView> rows,
                            float* out) const;
  // The coordinates of parameter tensor `tensor` that training on rows
  // [begin_row, end_row) of `train` can change, as sorted disjoint [begin, end)
  // runs of consecutive coordinates, when the model knows them; empty means all. A
  // sparse linear model only ever writes the weights of features that occur in its
  // rows (2^20 hashed features of which SpamAssassin uses 6 %, and each of two
  // workers 4 %), so the trainer copies only these into each epoch's evaluation
  // snapshot (all rows), and a worker's replica merges only its own rows' (its
  // partition). Callers coalesce runs as suits them (coalesce_ranges).
  using Ranges = hogwild::Ranges;
  virtual Ranges trained_ranges(std::size_t /*tensor*/, const Dataset& /*train*/,
                                std::size_t /*begin_row*/, std::size_t /*end_row*/) const {
    return {};
  }
  // True when step and predict read a dense row's bytes (RowView::bytes, a dense_u8
  // set: 8-bit images at a quarter of the float rows' memory traffic). The trainer
  // gives every other model the set widened to floats (Dataset::widened), and
  // check_rows refuses to hand such a model byte rows.
  virtual bool reads_byte_rows() const noexcept { return false; }
  // Throws ConfigError when `data` holds byte rows and the model reads floats.
  void check_rows(const Dataset& data) const;
  // Appends to `keys` the coordinates of tensor `tensor` that training on `batch`
  // may change (any order, repeats allowed), and returns true; false when the model
  // does not say for this tensor and batch. A parameter server's replica pushes and
  // fetches only the listed keys (modes/ps/ps.hpp); where a model says nothing, it
  // scans the whole tensor at each push. The list must hold every coordinate the
  // step changes.
  virtual bool touched(std::size_t /*tensor*/, const Batch& /*batch*/,
                       std::vector<std::uint32_t>& /*keys*/) const {
    return false;
  }
  // True when tensor 0 holds one weight per feature and the step touches it only at
  // the row's feature indices (w + index), every other tensor being small: hot
  // coordinates (--hot-k, src/modes/hogwild/hot_window.hpp) then work by renumbering the hot
  // features of the rows, without the model's knowledge. The linear models say so.
  virtual bool feature_indexed() const noexcept { return false; }
  // For a feature_indexed model: the largest second derivative of an example's loss
  // in its margin w.x + b (logistic 1/4, squared 1). A replica's merge takes from it
  // which features' changes settle between two merges (src/modes/hogwild/
  // settled_shares.hpp); a larger figure merges more of them as a share, never
  // fewer. 1 unless a model says.
  virtual double margin_curvature() const noexcept { return 1.0; }
};

}  // namespace hogwild
