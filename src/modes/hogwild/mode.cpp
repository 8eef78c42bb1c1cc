// hogwild: forked workers update the shared weights with no lock (Niu et al. 2011);
// the intended race is described in include/hogwild/update_policy.hpp.
#include <nlohmann/json.hpp>

#include "hogwild/model_base.hpp"
#include "modes/hogwild/layout_probe.hpp"
#include "modes/hogwild/writer_parts.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
class Hogwild final : public ModeDef {
 public:
  std::string_view name() const override { return "hogwild"; }
  std::string_view summary() const override { return "lock-free"; }
  std::uint8_t access() const override { return access_index<HogwildUpdate>(); }
  std::optional<DeviceAccess> device_access() const override { return DeviceAccess::hogwild; }
  bool replicas() const override { return true; }
  bool may_merge(const TrainConfig& c, unsigned workers) const override {
    return c.merge_every != 0 || !no_probe(c, workers);
  }
  // --layout auto's probe (with its replica, where nothing else sets the layout),
  // then hogwild's options: --merge-every, --hot-k, and across nodes the node sync.
  void make_parts(const ModeWorker& w, std::vector<std::unique_ptr<EpochPart>>& parts) const override {
    if (auto probe = make_layout_probe(w)) parts.push_back(std::move(probe));
    add_writer_parts(w, *this, parts);
  }
  // --layout auto: each worker keeps a replica while it probes (and after, when the
  // probe chose replicas), a copy of the parameters and its base (its hot window,
  // where it has one, is a few pages).
  Keeps worker_keeps(const ModeArena& a) const override {
    if (no_probe(a.config, a.workers)) return {};
    std::uint64_t floats = 0;
    for (const auto& s : a.specs) floats += (s.size + 15) / 16 * 16;
    return {2 * floats * sizeof(float), "the layout probe's replica and its base"};
  }
  // The probe's third choice, where the run affords it (probe_offers_hot).
  std::vector<std::uint32_t> own_hot_features(const TrainConfig& c, unsigned workers,
                                              const Dataset& train,
                                              std::size_t features) const override {
    return probe_hot_features(c, workers, train, features);
  }
  void collect_workers(const TrainConfig& c, std::span<const WorkerProgress> all,
                       TrainResult& r) const override {
    r.layout = layout_choice(c, all);
  }
  std::string progress_note(const TrainConfig& c, std::span<const WorkerProgress> all) const override {
    return layout_line(c, all);
  }
  void summarize(const TrainConfig& c, const TrainResult& r, nlohmann::json& j) const override {
    const TrainResult::LayoutChoice& l = r.layout;
    if (l.chosen.empty()) return;
    nlohmann::json layout{{"requested", to_string(c.layout)}, {"chosen", l.chosen},
                          {"why", l.why}, {"probed", l.probed}};
    if (l.probed) {
      layout["shared_ns_per_example"] = l.shared_ns;
      layout["replica_ns_per_example"] = l.replica_ns;
      if (l.hot_ns > 0) layout["hot_ns_per_example"] = l.hot_ns;
      layout["windows"] = l.windows;
      layout["workers"] = l.workers;
    }
    j["layout"] = std::move(layout);
  }
  std::string result_text(const TrainConfig&, const TrainResult& r) const override {
    return r.layout.probed ? ", layout " + r.layout.chosen : std::string();
  }
};
}  // namespace

const ModeDef& hogwild_mode() {
  static const Hogwild mode;
  return mode;
}

}  // namespace hogwild::detail
