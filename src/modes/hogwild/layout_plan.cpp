#include "modes/hogwild/layout_plan.hpp"

#include <algorithm>
#include <span>

#include <fmt/format.h>

#include "data/degrees.hpp"
#include "hogwild/error.hpp"
#include "modes/hogwild/hot_window.hpp"

namespace hogwild {

const char* to_string(WeightLayout l) noexcept {
  switch (l) {
    case WeightLayout::plain: return "plain";
    case WeightLayout::hot: return "hot";
    case WeightLayout::replicas: return "replicas";
    case WeightLayout::automatic: break;
  }
  return "auto";
}

WeightLayout parse_weight_layout(const std::string& name) {
  if (name == "auto") return WeightLayout::automatic;
  if (name == "plain") return WeightLayout::plain;
  if (name == "hot") return WeightLayout::hot;
  if (name == "replicas") return WeightLayout::replicas;
  throw ConfigError("--layout must be auto, plain, hot or replicas, got \"" + name + "\"");
}

}  // namespace hogwild

namespace hogwild::detail {

std::optional<std::string> no_probe(const TrainConfig& c, unsigned workers) {
  if (c.layout != WeightLayout::automatic) return fmt::format("--layout {}", to_string(c.layout));
  if (c.merge_every) return std::string("--merge-every");
  if (c.hot_k) return std::string("--hot-k");
  if (c.mode != Mode::hogwild) return fmt::format("--mode {}", to_string(c.mode));
  if (workers < 2) return std::string("one worker: no other core writes its cache lines");
  if (workers > kMaxWorkers)
    return fmt::format("more than {} workers: replicas merged every few thousand examples "
                       "diverged at 8 and 16 (docs/PERFORMANCE.md)", kMaxWorkers);
  if (c.optimizer != Optimizer::sgd)
    return fmt::format("--optimizer {}: a replica carries no optimiser state",
                       to_string(c.optimizer));
  if (c.nodes > 1) return std::string("several nodes: the node sync works on the shared weights");
  if (c.device == Device::cuda) return std::string("--device cuda");
  if (c.telemetry || c.conflicts)
    return std::string("--telemetry and --conflicts watch the updates to the shared weights");
  if (c.replicas_unsound)
    return std::string("a model that is not feature-indexed, or dense rows: a replica would add "
                       "every worker's whole change to the weights every example moves");
  return std::nullopt;
}

const char* fixed_layout(const TrainConfig& c) noexcept {
  if (c.merge_every) return "replicas";
  if (c.hot_k) return "hot";
  return c.layout == WeightLayout::automatic ? "plain" : to_string(c.layout);
}

bool replicas_sound(const Model& model, const Dataset& train) {
  return model.feature_indexed() && train.layout() == Layout::sparse;
}

void mark_replicas_unsound(TrainConfig& c, const Model& model, const Dataset& train) {
  c.replicas_unsound = c.layout == WeightLayout::automatic && !replicas_sound(model, train);
}

bool probe_offers_hot(const TrainConfig& c, unsigned workers, const Dataset& train) {
  return !no_probe(c, workers) && c.shm_dir.empty() &&
         train.nnz() * sizeof(std::uint32_t) <= kHotCopyMost;
}

namespace {
// hot_features' K from the degree table of `rows` rows.
std::size_t hot_count(std::span<const FeatureDegree> degrees, std::size_t rows) {
  std::size_t hot = 0;
  for (const FeatureDegree& d : degrees) hot += std::uint64_t{d.rows} * kHotShare >= rows;
  return std::clamp<std::size_t>(hot, 1, kHotMost);
}
}  // namespace

std::size_t hot_features(const Dataset& train) {
  return hot_count(feature_degrees(train, train.cols()), train.rows());
}

std::vector<std::uint32_t> probe_hot_features(const TrainConfig& c, unsigned workers,
                                              const Dataset& train, std::size_t features) {
  if (!probe_offers_hot(c, workers, train)) return {};
  const std::vector<FeatureDegree> degrees = feature_degrees(train, train.cols());
  // (K from all the features; the window's among the model's first `features`.)
  const auto within = std::partition_point(degrees.begin(), degrees.end(),
                                           [&](const FeatureDegree& d) { return d.feature < features; });
  return most_frequent(std::span<const FeatureDegree>(degrees.begin(), within),
                       hot_count(degrees, train.rows()));
}

std::string layout_plan(const TrainConfig& c, unsigned workers, const Dataset& train) {
  if (const auto why = no_probe(c, workers)) return fmt::format("layout {} ({})", fixed_layout(c), *why);
  const std::uint64_t window = probe_window_ns(c.epochs, train.rows(), workers);
  if (probe_offers_hot(c, workers, train))
    return fmt::format("layout auto: a probe times the shared weights against a replica and "
                       "against {} hot coordinates in the first {}-{} ms, then keeps the cheaper "
                       "of the two unless an example costs over {:.1f}x as much on it",
                       hot_features(train), probe_ms(1, 3, window), probe_ms(kPairs, 3, window),
                       kReplicaWins);
  return fmt::format("layout auto: a probe times the shared weights against a replica in the "
                     "first {}-{} ms, then keeps replicas unless an example costs over {:.1f}x "
                     "as much on them", probe_ms(1, 2, window), probe_ms(kPairs, 2, window),
                     kReplicaWins);
}

void resolve_layout(TrainConfig& c, const Dataset& train, const Model& model) {
  mark_replicas_unsound(c, model, train);
  if (c.layout == WeightLayout::replicas && !c.merge_every) c.merge_every = TrainConfig::kMergeAuto;
  if (c.layout != WeightLayout::hot || c.hot_k) return;
  check_hot_coordinates(model, train, "--layout hot");
  c.hot_k = hot_features(train);
}

}  // namespace hogwild::detail
