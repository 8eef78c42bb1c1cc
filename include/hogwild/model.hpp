// A model: named parameter tensors, their initialisation, a gradient step and an
// evaluation. The library owns everything else (arena, workers, partitions, the
// step loop, modes, metrics). Built-in models and user-defined ones use exactly
// this interface; see model_base.hpp for the CRTP helper that compiles one
// templated `step` for every access policy.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/update_policy.hpp"

namespace hogwild {

// How a tensor is initialised by the parent before the workers start.
struct Init {
  enum Kind : std::uint8_t { zeros, normal, uniform } kind = zeros;
  float scale = 0;  // standard deviation (normal) or half-width (uniform)
};

struct TensorSpec {
  std::string name;
  std::size_t size = 0;  // floats
  Init init{};
};

// The parameters as a model sees them: one float array per TensorSpec, in the
// order the model declared them. Live parameters point into the shared arena;
// evaluation runs on a private snapshot with the same shape.
class ParamSet {
 public:
  struct Tensor {
    std::string name;
    float* data;
    std::size_t size;
    float* state = nullptr;  // optimiser state of the same size (AdaGrad), else null
    float* grad = nullptr;   // the gradient path's buffer of the same size (gradient.hpp)
    bool exclusive = false;  // as ParamSet::exclusive()
  };
  ParamSet() = default;
  explicit ParamSet(std::vector<Tensor> t, bool exclusive = false)
      : tensors_(std::move(t)), exclusive_(exclusive) {
    for (auto& x : tensors_) x.exclusive = exclusive;
  }
  float* data(std::size_t i) const noexcept { return tensors_[i].data; }
  std::size_t size(std::size_t i) const noexcept { return tensors_[i].size; }
  std::size_t count() const noexcept { return tensors_.size(); }
  const Tensor& tensor(std::size_t i) const noexcept { return tensors_[i]; }
  const Tensor& operator[](std::size_t i) const noexcept { return tensors_[i]; }
  const std::vector<Tensor>& tensors() const noexcept { return tensors_; }
  // True when one worker alone reads and writes these floats while it trains (its
  // replica under --merge-every): a model may then treat them as private even in a
  // shared mode, as the MLP does. False for the shared arena.
  bool exclusive() const noexcept { return exclusive_; }

 private:
  std::vector<Tensor> tensors_;
  bool exclusive_ = false;
};

// A private copy of a ParamSet (relaxed loads from the live weights).
class ParamSnapshot {
 public:
  explicit ParamSnapshot(const ParamSet& live);
  const ParamSet& params() const noexcept { return view_; }
  // Copies again, from the same live set, only ranges[t] of tensor t (all of it where
  // ranges has no entry or an empty one): what training can have changed since.
  void refresh(const ParamSet& live,
               const std::vector<std::vector<std::pair<std::size_t, std::size_t>>>& ranges);

 private:
  std::vector<std::vector<float>> storage_;
  ParamSet view_;
};

// What the labels mean to a model; the trainer maps raw labels to targets.
enum class LabelKind : std::uint8_t {
  binary,          // targets 0/1 (from 0/1, -1/+1, or any two distinct values)
  multiclass,      // targets 0..classes-1 (sorted distinct training labels)
  real,            // targets are the raw labels
  binary_or_real,  // binary when the training set has two distinct labels, else real
};

// The training problem a model is built for.
struct Problem {
  std::size_t features = 0;  // columns of the training set
  std::size_t classes = 0;   // distinct training labels (multiclass), 2 (binary), 0 (real)
  Layout layout = Layout::sparse;
  // Ratings (Layout::ratings): 1 + the largest user and item id over train and test.
  std::size_t users = 0, items = 0;
  double target_mean = 0;  // mean training target (real labels); 0 otherwise
};

// Options shared by the built-in models (a user model may ignore them).
// The precision of a model's matrix products (the MLP's): fp32, or bf16 operands
// summed in float on the CPU's AMX tile unit (what PyTorch's
// set_float32_matmul_precision("medium") allows); the weights, the SGD step and
// evaluation stay float either way.
enum class MatmulPrecision : unsigned char { fp32, bf16 };
MatmulPrecision parse_matmul_precision(const std::string& name);  // "fp32" | "bf16"
const char* to_string(MatmulPrecision p) noexcept;

struct ModelOptions {
  float l2 = 0;      // L2 penalty lambda/2 * ||w||^2 (bias excluded)
  bool bias = true;  // learn an intercept
  std::vector<std::size_t> hidden{256, 128};  // mlp: widths of the hidden layers
  std::size_t rank = 10;  // matrix factorization: factors per user and per item
  // mlp: the training products' operands (evaluation is always fp32). bf16 needs
  // AMX-BF16 (kernels::bf16::available); other models reject it.
  MatmulPrecision matmul = MatmulPrecision::fp32;
  // Hot coordinates (models that are Model::feature_indexed, sparse rows, parallel
  // modes, SGD): each worker trains its own copy of the bias and of the hot_k
  // features most frequent in the training rows, and adds what it changed to the
  // shared weights every hot_flush examples and at the end of each epoch
  // (HOGWILD++/DimmWitted-style replication of the coordinates every example
  // touches, whose cache lines otherwise bounce between cores;
  // models/hot_coordinates.hpp). 0: off.
  std::size_t hot_k = 0;
  std::size_t hot_flush = 256;
};

// A batch of rows, by index into the dataset, with their targets.
struct Batch {
  const Dataset* data;
  const float* targets;  // one per dataset row
  const std::uint32_t* rows;
  std::size_t size;
  RowView row(std::size_t i) const noexcept { return data->row(rows[i]); }
  float target(std::size_t i) const noexcept { return targets[rows[i]]; }
};

struct Evaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();      // mean loss per row
  double accuracy = std::numeric_limits<double>::quiet_NaN();  // classification only
  double rmse = std::numeric_limits<double>::quiet_NaN();      // regression only
  std::size_t rows = 0;
};

// Which compilation of a model's step a batch runs: `access` is the policy's index
// in HOGWILD_ACCESS_POLICIES (update_policy.hpp; access_index<P>() in
// model_base.hpp), `optimizer` an Optimizer (optimizer.hpp). A mode picks it.
struct StepKind {
  std::uint8_t access = 0;
  std::uint8_t optimizer = 0;
};

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
  // Per-worker hooks around each epoch's batches, called in the worker process (so
  // a model's members are private to it there): `rows` are the worker's rows of
  // the epoch, in order. end_epoch runs also when the epoch was cut short.
  virtual void begin_epoch(std::span<const std::uint32_t> /*rows*/) {}
  virtual void end_epoch() {}
  virtual Evaluation evaluate(const ParamSet& params, const Dataset& data,
                              const float* targets) const = 0;
  // The coordinates of parameter tensor `tensor` that training on rows
  // [begin_row, end_row) of `train` can change, as sorted disjoint [begin, end)
  // runs of consecutive coordinates, when the model knows them; empty means all. A
  // sparse linear model only ever writes the weights of features that occur in its
  // rows (2^20 hashed features of which SpamAssassin uses 6 %, and each of two
  // workers 4 %), so the trainer copies only these into each epoch's evaluation
  // snapshot (all rows), and a worker's replica merges only its own rows' (its
  // partition). Callers coalesce runs as suits them (coalesce_ranges).
  using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;
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
  // True when tensor 0 holds one weight per feature and the step touches it only at
  // the row's feature indices (w + index), every other tensor being small: hot
  // coordinates (--hot-k, hot_coordinates.hpp) then work by renumbering the hot
  // features of the rows, without the model's knowledge. The linear models say so.
  virtual bool feature_indexed() const noexcept { return false; }
};

// Ranges whose gap is under `gap` coordinates joined into one (a copy of a few
// untouched floats costs less than another loop; 16 floats are a cache line).
Model::Ranges coalesce_ranges(const Model::Ranges& ranges, std::size_t gap);

// Copies `from` into `to` (the same shape) with relaxed loads: ranges[t] of tensor t,
// all of it where `ranges` has no entry or an empty one for t.
void copy_ranges(const ParamSet& from, const ParamSet& to,
                 const std::vector<Model::Ranges>& ranges);

using ModelFactory = std::function<std::unique_ptr<Model>(const ModelOptions&)>;

// The registry: every built-in model registers itself here; users may add theirs
// and then name them with --model (or through TrainConfig::model).
void register_model(const std::string& name, ModelFactory factory);
std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& options = {});
std::vector<std::string> model_names();

}  // namespace hogwild
