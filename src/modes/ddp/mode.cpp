// ddp: PyTorch's DistributedDataParallel on shared memory. Every worker computes
// the gradient of its own mini-batch (GradientCapture), the gradients are averaged
// over the workers by the Communicator, and the averaged update is applied once:
// the workers' replicas are the one copy in the arena, which every worker reads
// between steps and of which each updates its own slice (the reduce-scatter's
// "in place" form; modes/ddp/gradient_sync.hpp). The workers step in lockstep, so a
// dead one stops the run instead of being respawned alone.
#include <fmt/format.h>

#include "hogwild/error.hpp"
#include "hogwild/gradient.hpp"
#include "hogwild/model_base.hpp"
#include "comm/gloo.hpp"
#include "comm/nccl.hpp"
#include "comm/shm.hpp"
#include "modes/ddp/device_sync.hpp"
#include "modes/ddp/gradient_sync.hpp"
#include "modes/mode_def.hpp"
#include "options/kinds.hpp"

namespace hogwild::detail {

namespace {

class Ddp final : public ModeDef {
 public:
  std::string_view name() const override { return "ddp"; }
  std::string_view summary() const override {
    return "synchronous data parallel: gradients averaged every step";
  }
  std::uint8_t access() const override { return access_index<GradientCapture>(); }
  std::optional<DeviceAccess> device_access() const override { return DeviceAccess::gradient; }
  bool synchronous() const override { return true; }
  bool deals_rows() const override { return true; }
  bool joins_nodes() const override { return true; }
  bool workers_wait() const override { return true; }  // in every step's collective

  std::vector<OptionInfo> config_options() const override {
    using namespace options;
    std::vector<OptionInfo> v;
    v.push_back(agreed(whole({"accumulate", Concern::mode,
                       "--mode ddp: combine the gradients of K mini-batches before one update "
                       "(PyTorch's no_sync)", "K"},
                      [](auto& c) -> auto& { return c.accumulate; }, 1, 1000000)));
    v.push_back(agreed(custom(
        {"bucket-mb", Concern::mode,
         "--mode ddp: reduce the gradients in buckets of this many MiB after a first one of "
         "1 MiB (0: 25, PyTorch's)", "MB"},
        [](const TrainConfig& c) {
          return fmt::format("{}", static_cast<double>(c.bucket_bytes) / (1 << 20));
        },
        [](TrainConfig& c, const std::string& t) {
          const double mb = parse_real("bucket-mb", t);
          if (mb < 0 || mb > 65536 || (mb > 0 && mb * (1 << 20) < 4096))
            throw ConfigError(fmt::format("--bucket-mb must be 0 (25 MiB) or from 4 KiB (0.004) "
                                          "to 65536, got {}", t));
          c.bucket_bytes = static_cast<std::size_t>(mb * (1 << 20));
        })));
    v.push_back(choice({"comm", Concern::mode,
                        "--mode ddp: how the workers combine gradients: shm (the shared arena) "
                        "or gloo (TCP over loopback, for comparison)", "shm|gloo"},
                       [](auto& c) -> auto& { return c.comm; },
                       [](const std::string& t) {
                         if (t != "shm" && t != "gloo")
                           throw ConfigError(
                               fmt::format("--comm must be shm or gloo, got \"{}\"", t));
                         if (t == "gloo" && !gloo_built())
                           throw ConfigError("--comm gloo: this build has no Gloo (install "
                                             "libgloo-dev and libhiredis-dev, "
                                             "scripts/install-deps.sh, and build again)");
                         return t;
                       },
                       [](const std::string& t) { return t; }));
    return v;
  }

  void check(const TrainConfig& c) const override {
    if (c.hot_k > 0)
      throw ConfigError("--hot-k does not apply to --mode ddp: its workers do not write the "
                        "weights while they step");
  }
  // Its gradient buffers (FlatGradient: each tensor on cache lines of its own).
  Keeps worker_keeps(const ModeArena& a) const override {
    std::uint64_t floats = 0;
    for (const auto& s : a.specs) floats += FlatGradient::padded(s.size);
    return {floats * sizeof(float), "gradient"};
  }

  // The node's group: the shared-memory communicator's region (also under --comm
  // gloo, which a device backend over host memory falls back to), and under
  // --device cuda the slot where rank 0 hands NCCL's id to the others.
  void arena_blocks(const ModeArena& a, std::vector<BlockSpec>& blocks) const override {
    blocks.push_back({"comm", ShmCommunicator::region_bytes(a.workers)});
    if (a.config.device == Device::cuda) blocks.push_back({"nccl_id", sizeof(NcclIdSlot)});
  }
  void init_blocks(const ModeArena& a, Arena& arena) const override {
    ShmCommunicator::prepare(arena.block("comm"), a.workers);
  }
  // On the CPU; under --device cuda its device part (below) sums the gradients.
  std::unique_ptr<EpochPart> make_part(const ModeWorker& w) const override {
    if (w.config.device == Device::cuda) return nullptr;
    // The worker's groups: this node's workers; with several nodes, the workers of
    // its local rank on every node, which start from the first node's weights.
    auto comm = w.communicator();
    auto across = w.across();
    auto sync = std::make_unique<GradientSync>(
        w.params, *comm, across.get(), w.config.optimizer, w.config.accumulate,
        w.config.bucket_bytes, w.model->feature_indexed() && w.train->layout() == Layout::sparse);
    if (across) sync->broadcast_weights();
    sync->keep(std::move(comm), std::move(across));
    return sync;
  }
  // Each rank's kernels add its mini-batch's gradient; the ranks sum them (NCCL's
  // group of every rank) and each applies the mean, from rank 0's weights.
  std::unique_ptr<DevicePart> make_device_part(const ModeWorker& w,
                                               DeviceSteps& steps) const override {
    const TrainConfig& c = w.config;
    auto sync = std::make_unique<DeviceGradientSync>(steps, w.device_communicator(), c.batch,
                                                     c.accumulate, c.bucket_bytes);
    sync->broadcast_weights();
    return sync;
  }
};
}  // namespace

const ModeDef& ddp_mode() {
  static const Ddp mode;
  return mode;
}

}  // namespace hogwild::detail
