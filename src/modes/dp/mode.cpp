// dp: PyTorch's DataParallel, the single-process synchronous baseline. The parent
// trains alone, and each mini-batch is split among `--workers` TBB threads; each
// thread computes the loss and gradient of its shard with a model of its own
// (GradientCapture into its own buffer: nothing is gathered onto one thread but
// the gradients), the gradients are summed in thread order and applied once
// (modes/dp/data_parallel.hpp). Nothing is forked, so no thread is ever inherited.
#include <algorithm>

#include "hogwild/gradient.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/model_registry.hpp"
#include "modes/dp/data_parallel.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
class Dp final : public ModeDef {
 public:
  std::string_view name() const override { return "dp"; }
  std::string_view summary() const override {
    return "one process, each mini-batch split among threads";
  }
  std::uint8_t access() const override { return access_index<GradientCapture>(); }
  bool parallel() const override { return false; }
  bool threaded() const override { return true; }

  // The threads' models, made by name and configured as the worker's was, and their
  // gradient buffers.
  std::unique_ptr<EpochPart> make_part(const ModeWorker& w) const override {
    const TrainConfig& c = w.config;
    std::vector<std::unique_ptr<Model>> models;
    for (unsigned k = 0; k < std::max(1u, c.workers); ++k) {
      models.push_back(make_model(c.model, c.model_options));
      models.back()->configure(*w.problem);
    }
    return std::make_unique<DataParallel>(
        std::move(models), w.params, c.optimizer,
        w.model->feature_indexed() && w.train->layout() == Layout::sparse);
  }
};
}  // namespace

const ModeDef& dp_mode() {
  static const Dp mode;
  return mode;
}

}  // namespace hogwild::detail
