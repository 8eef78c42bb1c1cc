// simulated: K virtual workers in the calling process, their reads and writes
// events on a simulated clock (modes/simulated/simulator.hpp): staleness and lost
// updates known exactly, the same seed the same weights, past the machine's cores.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "hogwild/model_base.hpp"
#include "modes/mode_def.hpp"
#include "modes/simulated/simulator.hpp"
#include "options/kinds.hpp"
#include "trainer/progress.hpp"
#include "trainer/step_loop.hpp"

namespace hogwild::detail {

namespace {

std::vector<std::size_t> sizes_of(std::span<const TensorSpec> specs) {
  std::vector<std::size_t> v;
  for (const auto& s : specs) v.push_back(s.size);
  return v;
}

// A histogram's quantiles: exact below its last bucket (SimulationFigures).
Quantiles quantiles(const std::uint64_t (&h)[SimulationFigures::kHistogram], double sum,
                    std::uint64_t max) {
  Quantiles q;
  for (const std::uint64_t n : h) q.samples += n;
  if (q.samples == 0) return q;
  q.mean = sum / static_cast<double>(q.samples);
  q.max = max;
  const auto at = [&](double f) {
    const auto want = static_cast<std::uint64_t>(std::ceil(f * static_cast<double>(q.samples)));
    std::uint64_t seen = 0;
    for (std::size_t v = 0; v < SimulationFigures::kHistogram; ++v)
      if ((seen += h[v]) >= std::max<std::uint64_t>(want, 1)) return std::min<std::uint64_t>(v, max);
    return max;
  };
  q.p50 = at(0.5);
  q.p90 = at(0.9);
  q.p99 = at(0.99);
  return q;
}

// Where a run's costs came from: its --cost-model file, or the built-in ones.
std::string cost_source(const TrainConfig& c) {
  return c.cost_model.empty() ? default_cost_model().source : c.cost_model;
}

// Examples a second of simulated time: those this process simulated (a resumed
// run's clock starts again at 0; the checkpoint's examples are not on it).
double simulated_rate(const TrainResult& r) {
  return r.simulation.seconds > 0 ? static_cast<double>(r.simulation.examples) / r.simulation.seconds
                                  : 0.0;
}

// The cost model the run read, from its figures.
CostModel costs_of(const SimulationFigures& f) {
  CostModel m;
  m.idle_ns = f.idle_ns;
  m.example_ns = f.example_ns;
  m.read_ns = f.read_ns;
  m.write_ns = f.write_ns;
  m.coherence_ns = f.coherence_ns;
  m.queue = f.queue;
  m.recent_writes = f.recent_writes;
  m.speed.assign(f.speed, f.speed + f.speeds);
  return m;
}

class Simulated final : public ModeDef {
 public:
  std::string_view name() const override { return "simulated"; }
  std::string_view summary() const override {
    return "K virtual workers on a simulated clock, one process (docs/EXPERIMENTS.md)";
  }
  std::uint8_t access() const override { return access_index<SimulatedUpdate>(); }
  bool parallel() const override { return false; }
  bool simulated() const override { return true; }

  std::vector<OptionInfo> config_options() const override {
    using namespace options;
    std::vector<OptionInfo> v;
    v.push_back(resumed(choice({"simulate-access", Concern::mode,
                        "--mode simulated: how the virtual workers' writes land: hogwild (a "
                        "load, then a store a write's cost later: a store of another worker in "
                        "between is lost), atomic (nothing lost), lock (one update at a time) "
                        "or striped (striped mode's locks over the features, --stripes)",
                        "hogwild|atomic|lock|striped"},
                       [](auto& c) -> auto& { return c.simulate_access; },
                       [](const std::string& t) {
                         parse_simulated_access(t);
                         return t;
                       },
                       [](const std::string& t) { return t; })));
    v.push_back(resumed(text({"cost-model", Concern::mode,
                      "--mode simulated: a JSON file of the costs in simulated ns (example_ns, idle_ns, "
                      "read_ns, write_ns, coherence_ns, recent_writes, queue: true or false, speed: one factor a worker); "
                      "the built-in ones without it", "FILE"},
                     [](auto& c) -> auto& { return c.cost_model; })));
    return v;
  }

  // striped mode's --stripes, for --simulate-access striped.
  std::vector<ModeOption> options() const override { return {stripes_option()}; }

  void check(const TrainConfig& c) const override {
    if (c.device != Device::cpu)
      throw ConfigError("--mode simulated runs on the CPU: leave out --device cuda");
    if (c.merge_every || c.hot_k)
      throw ConfigError("--merge-every and --hot-k do not apply to --mode simulated: its "
                        "workers write the shared weights as plain hogwild's do");
    if (c.telemetry || c.conflicts)
      throw ConfigError("--telemetry and --conflicts do not apply to --mode simulated: it "
                        "measures every update's staleness and lost writes exactly, into the "
                        "same fields of the summary");
    if (c.nodes > 1) throw ConfigError("--mode simulated runs on one node: leave out --nodes");
    if (c.grad_delay_ns)
      throw ConfigError("--grad-delay-ns does not apply to --mode simulated: give the cost "
                        "model's example_ns instead (--cost-model)");
    if (c.workers > 65534)
      throw ConfigError(fmt::format("--mode simulated: at most 65534 workers, not {}", c.workers));
    if (parse_simulated_access(c.simulate_access) != SimulatedAccess::striped &&
        c.mode_options.contains("stripes"))
      throw ConfigError(fmt::format("--stripes applies to --simulate-access striped, not {}",
                                    c.simulate_access));
    if (!c.cost_model.empty()) read_cost_model(c.cost_model);  // its errors before training
  }

  void arena_blocks(const ModeArena& a, std::vector<BlockSpec>& blocks) const override {
    const std::size_t lines = Simulator::lines(sizes_of(a.specs),
                                               a.config.optimizer == Optimizer::adagrad);
    blocks.push_back({"simulation", sizeof(SimulationFigures)});
    blocks.push_back({"simulation_lines", lines * sizeof(Simulator::LineState)});
    blocks.push_back({"simulation_stores", a.config.workers * sizeof(std::uint32_t)});
  }

  std::optional<double> train_epoch(Model& model, const EpochTask& t,
                                    const ModeWorker& w) const override {
    const TrainConfig& c = w.config;
    auto& f = w.arena.object<SimulationFigures>("simulation");
    if (!f.costs_read) {  // once: the same costs for every epoch
      const CostModel read = c.cost_model.empty() ? default_cost_model() : read_cost_model(c.cost_model);
      f.idle_ns = read.idle_ns;
      f.example_ns = read.example_ns;
      f.read_ns = read.read_ns;
      f.write_ns = read.write_ns;
      f.coherence_ns = read.coherence_ns;
      f.queue = read.queue;
      f.recent_writes = read.recent_writes;
      f.speeds = static_cast<std::uint32_t>(read.speed.size());
      std::copy(read.speed.begin(), read.speed.end(), f.speed);
      f.costs_read = true;
    }
    Simulator sim({model, t.params, c, parse_simulated_access(c.simulate_access), costs_of(f),
                   c.workers, static_cast<unsigned>(mode_option(c, "stripes")), f,
                   w.arena.array<Simulator::LineState>("simulation_lines"),
                   w.arena.array<std::uint32_t>("simulation_stores")});
    const double loss = sim.epoch(*t.data, t.rows, t.targets, t.step_size, t.epoch, t.stop,
                                  t.progress ? &t.progress->samples : nullptr);
    if (t.progress) {
      const bool stopped = t.stop && t.stop->load(std::memory_order_relaxed);
      // An epoch cut short starts again from its beginning when the run resumes.
      publish_record(*t.progress, t.progress->samples.load(std::memory_order_relaxed),
                     stopped ? 0 : t.rows.size(), stopped ? 0 : loss);
    }
    return loss;
  }

  void collect(Arena& arena, TrainResult& r) const override {
    const auto& f = arena.object<SimulationFigures>("simulation");
    r.simulation.costs = {{"idle_ns", f.idle_ns},   {"example_ns", f.example_ns},
                          {"read_ns", f.read_ns},   {"write_ns", f.write_ns},
                          {"coherence_ns", f.coherence_ns},
                          {"recent_writes", static_cast<double>(f.recent_writes)},
                          {"queue", f.queue ? 1.0 : 0.0}};
    r.simulation.speed.assign(f.speed, f.speed + f.speeds);
    r.simulation.seconds = f.seconds;
    r.simulation.examples = f.examples;
    r.simulation.updates = f.updates;
    r.simulation.writes = f.writes;
    r.simulation.lost_writes = f.lost_writes;
    r.simulation.moves = f.moves;
    r.simulation.lost_mass = f.lost_mass;
    // Exact, in the fields the sampling instruments fill (--telemetry, --conflicts).
    r.staleness.every = 1;
    r.staleness.lag = quantiles(f.lag, f.lag_sum, f.lag_max);
    r.staleness.overlap = quantiles(f.overlap, f.overlap_sum, f.overlap_max);
    for (std::size_t v = 0; v < SimulationFigures::kHistogram; ++v)
      if (f.lag[v]) r.staleness.lag_histogram.emplace_back(v, f.lag[v]);
    r.conflicts.measured = true;
    r.conflicts.writes = f.writes;
    r.conflicts.conflicts = f.lost_writes;
    r.conflicts.conflict_rate =
        f.writes ? static_cast<double>(f.lost_writes) / static_cast<double>(f.writes) : 0;
    r.conflicts.lost_mass_mean = f.writes ? f.lost_mass / static_cast<double>(f.writes) : 0;
    // The sampling instruments' view of the same schedule.
    const Staleness s = summarize_staleness({&f.sampled, 1}, f.telemetry_every);
    r.simulation.instruments = {
        {"telemetry_every", static_cast<double>(s.every)},
        {"sampled_updates", static_cast<double>(s.lag.samples)},
        {"sampled_lag_mean", s.lag.mean},
        {"sampled_lag_p50", static_cast<double>(s.lag.p50)},
        {"sampled_lag_p99", static_cast<double>(s.lag.p99)},
        {"sampled_lag_max", static_cast<double>(s.lag.max)},
        {"sampled_overlap_mean", s.overlap.mean},
        {"sampled_overlap_p99", static_cast<double>(s.overlap.p99)},
        {"conflict_coordinates", static_cast<double>(f.conflict_sample.count)},
        {"conflict_writes", static_cast<double>(f.sample_writes)},
        {"conflict_conflicts", static_cast<double>(f.sample_conflicts)},
    };
  }

  std::optional<double> clock(Arena& arena) const override {
    return arena.object<SimulationFigures>("simulation").seconds;
  }

  void summarize(const TrainConfig& c, const TrainResult& r, nlohmann::json& j) const override {
    // Its conflicts are every write's, exact: no sample of coordinates, so no
    // coordinate's own lost mass (lost_mass_mean: the changes overwritten, a write).
    if (j.contains("conflicts")) {
      auto& x = j["conflicts"];
      x["exact"] = true;
      x["lost_mass_max"] = nullptr;
      x["coordinates"] = nullptr;
    }
    // --stripes is striped's: another access has none (and refuses the option).
    if (c.simulate_access != "striped" && j.contains("mode_options")) {
      j["mode_options"].erase("stripes");
      if (j["mode_options"].empty()) j.erase("mode_options");
    }
    // As a --cost-model file writes them (the block is one: read_cost_model takes
    // it back, its source as free text): queue true or false, a whole count.
    nlohmann::json costs(r.simulation.costs);
    costs["queue"] = costs.value("queue", 0.0) != 0.0;
    costs["recent_writes"] = static_cast<std::uint64_t>(costs.value("recent_writes", 0.0));
    costs["source"] = cost_source(c);
    costs["speed"] = r.simulation.speed;
    j["simulation"] = {
        {"access", c.simulate_access},
        {"seconds", r.simulation.seconds},
        {"examples_per_second", simulated_rate(r)},
        {"updates", r.simulation.updates},
        {"writes", r.simulation.writes},
        {"lost_writes", r.simulation.lost_writes},
        {"moves", r.simulation.moves},
        {"lost_mass", r.simulation.lost_mass},
        {"cost_model", costs},
        {"instruments", r.simulation.instruments},
    };
  }

  std::string result_text(const TrainConfig& c, const TrainResult& r) const override {
    return fmt::format(", simulated {} worker(s) ({}): {:.4g} s, {:.4g} examples/s simulated, "
                       "lag mean {:.2f} max {}, {} lost write(s)",
                       c.workers, c.simulate_access, r.simulation.seconds, simulated_rate(r),
                       r.staleness.lag.mean, r.staleness.lag.max, r.simulation.lost_writes);
  }
};

}  // namespace

const ModeDef& simulated_mode() {
  static const Simulated mode;
  return mode;
}

}  // namespace hogwild::detail
