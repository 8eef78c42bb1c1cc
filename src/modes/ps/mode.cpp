// ps: a parameter server (DistBelief's Downpour SGD) on one machine. Each worker is
// a model replica training a private copy of the weights (GradientCapture), pushing
// its accumulated updates to --servers server processes, each the one writer of its
// shard of the arena's weights, and fetching fresh weights every so often
// (modes/ps/ps.hpp). Replicas are respawned as hogwild's workers are; a server is not.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "hogwild/gradient.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/model_base.hpp"
#include "modes/mode_def.hpp"
#include "modes/ps/ps.hpp"
#include "options/kinds.hpp"

namespace hogwild::detail {

namespace {
class Ps final : public ModeDef {
 public:
  std::string_view name() const override { return "ps"; }
  std::string_view summary() const override {
    return "parameter server: replicas push updates to sharded servers, fetch weights";
  }
  std::uint8_t access() const override { return access_index<GradientCapture>(); }
  bool joins_nodes() const override { return true; }
  unsigned services(const TrainConfig& c) const override { return c.servers; }
  bool workers_wait() const override { return true; }  // for the servers, a bound
  // A replica's private weights and the pushes it accumulates.
  Keeps worker_keeps(const ModeArena& a) const override {
    std::uint64_t floats = 0;
    for (const auto& s : a.specs) floats += s.size;
    return {2 * floats * sizeof(float), "weights and pushes"};
  }

  std::vector<OptionInfo> config_options() const override {
    using namespace options;
    std::vector<OptionInfo> v;
    v.push_back(agreed(whole({"servers", Concern::mode,
                       "--mode ps: server processes, each owning a slice of every tensor", "S"},
                      [](auto& c) -> auto& { return c.servers; }, 1, PsReplicaSlot::kMaxServers)));
    v.push_back(whole({"push-every", Concern::mode,
                       "--mode ps: a replica pushes its accumulated updates every N mini-batches",
                       "N"},
                      [](auto& c) -> auto& { return c.push_every; }, 1, 1u << 30));
    v.push_back(whole({"fetch-every", Concern::mode,
                       "--mode ps: a replica fetches fresh weights every M mini-batches", "M"},
                      [](auto& c) -> auto& { return c.fetch_every; }, 1, 1u << 30));
    v.push_back(custom({"staleness", Concern::mode,
                        "--mode ps: a replica more than S pushes ahead of the slowest waits (0: "
                        "bulk-synchronous; -1, the default: no bound)", "S"},
                       [](const TrainConfig& c) { return fmt::format("{}", c.staleness); },
                       [](TrainConfig& c, const std::string& t) {
                         c.staleness = parse_whole<long>("staleness", t, -1, 1l << 30);
                       }));
    v.push_back(agreed(choice({"key-ranges", Concern::mode,
                        "--mode ps: which coordinates each server owns: contiguous (a slice of "
                        "every tensor; dense tensors go as buckets) or hashed (spread by a hash "
                        "of the index, so that popular low ids load every server alike; pairs "
                        "only)", "contiguous|hashed"},
                       [](auto& c) -> auto& { return c.hashed_keys; },
                       [](const std::string& t) {
                         if (t != "contiguous" && t != "hashed")
                           throw ConfigError(fmt::format(
                               "--key-ranges must be contiguous or hashed, got \"{}\"", t));
                         return t == "hashed";
                       },
                       [](bool hashed) { return hashed ? "hashed" : "contiguous"; })));
    return v;
  }

  void check(const TrainConfig& c) const override {
    if (c.merge_every || c.hot_k)
      throw ConfigError("--merge-every and --hot-k do not apply to --mode ps: its replicas "
                        "already train private copies");
  }

  // A replica died: what it trained since its last push is gone (and counted).
  std::string worker_died(Arena& arena, unsigned rank) const override {
    auto& slot = PsRegion(arena.block("ps")).replica(rank);
    const std::uint64_t n = slot.unpushed.load(std::memory_order_relaxed);
    slot.lost.fetch_add(n, std::memory_order_relaxed);
    return fmt::format(" (the updates of its {} example(s) since its last push are lost)", n);
  }

  // The replicas' and servers' counters, from their slots.
  void collect(Arena& arena, TrainResult& r) const override {
    const PsRegion ps(arena.block("ps"));
    std::uint64_t gaps = 0, push_gaps = 0;
    for (unsigned w = 0; w < ps.replicas(); ++w) {
      const auto& slot = ps.replica(w);
      r.ps.pushes += slot.clock.load(std::memory_order_relaxed);
      r.ps.fetches += slot.pulls.load(std::memory_order_relaxed);
      r.ps.bytes += slot.bytes.load(std::memory_order_relaxed);
      gaps += slot.gap_sum.load(std::memory_order_relaxed);
      r.ps.max_staleness = std::max(r.ps.max_staleness, slot.gap_max.load(std::memory_order_relaxed));
      r.ps.push_seconds += static_cast<double>(slot.wait_ns.load(std::memory_order_relaxed)) * 1e-9;
      push_gaps += slot.push_gap_sum.load(std::memory_order_relaxed);
      r.ps.max_push_staleness =
          std::max(r.ps.max_push_staleness, slot.push_gap_max.load(std::memory_order_relaxed));
      r.ps.lost_examples += slot.lost.load(std::memory_order_relaxed);
    }
    if (r.ps.fetches) r.ps.mean_staleness = static_cast<double>(gaps) / static_cast<double>(r.ps.fetches);
    if (r.ps.pushes)
      r.ps.mean_push_staleness = static_cast<double>(push_gaps) / static_cast<double>(r.ps.pushes);
    for (unsigned s = 0; s < ps.servers(); ++s) {
      r.ps.server_records.push_back(ps.server(s).records.load(std::memory_order_relaxed));
      r.ps.server_keys.push_back(ps.server(s).keys.load(std::memory_order_relaxed));
      r.ps.rounds = std::max(r.ps.rounds, ps.server(s).rounds.load(std::memory_order_relaxed));
      r.ps.network_bytes += ps.server(s).sent_bytes.load(std::memory_order_relaxed);
    }
  }

  // The region the replicas and servers meet in: every replica's slot, every
  // server's, and a ring from each replica to each server.
  void arena_blocks(const ModeArena& a, std::vector<BlockSpec>& blocks) const override {
    const TrainConfig& c = a.config;
    // Every server needs a part of the largest tensor (its shards of smaller ones may
    // be empty).
    std::size_t largest = 0;
    for (const auto& s : a.specs) largest = std::max(largest, s.size);
    if (std::size_t{c.servers} * c.nodes > largest)
      throw ConfigError(fmt::format(
          "--servers {}{} makes {} shards, but the model's largest tensor has {} coordinates: "
          "use at most {} servers",
          c.servers, c.nodes > 1 ? fmt::format(" on {} nodes", c.nodes) : "",
          std::size_t{c.servers} * c.nodes, largest, std::max<std::size_t>(1, largest / c.nodes)));
    blocks.push_back({"ps", PsRegion::bytes(a.workers, c.servers)});
  }
  void init_blocks(const ModeArena& a, Arena& arena) const override {
    const TrainConfig& c = a.config;
    PsRegion::prepare(arena.block("ps"), a.workers, c.servers, c.nodes, c.hashed_keys);
  }
  // A replica: a private copy of the weights, fetched from the servers, and its pushes.
  std::unique_ptr<EpochPart> make_part(const ModeWorker& w) const override {
    const TrainConfig& c = w.config;
    return std::make_unique<PsClient>(
        w.params, PsRegion(w.arena.block("ps")), w.rank,
        PsOptions{c.push_every, c.fetch_every, c.staleness, c.optimizer, w.model}, w.stop);
  }
  // Server `index`: across nodes with the servers of its slice on every node.
  void serve(const ModeWorker& w, unsigned index) const override {
    const auto across = w.across();
    detail::serve(w.params, PsRegion(w.arena.block("ps")), index, w.config.optimizer, w.stop,
                  across.get());
  }

  void summarize(const TrainConfig& c, const TrainResult& r, nlohmann::json& j) const override {
    const auto& p = r.ps;
    j["ps"] = {{"servers", c.servers},
               {"push_every", c.push_every},
               {"fetch_every", c.fetch_every},
               {"staleness_bound", c.staleness < 0 ? nlohmann::json() : nlohmann::json(c.staleness)},
               {"key_ranges", c.hashed_keys ? "hashed" : "contiguous"},
               {"pushes", p.pushes},
               {"fetches", p.fetches},
               {"bytes_pushed", p.bytes},
               {"staleness_at_push_mean", p.mean_push_staleness},
               {"staleness_at_push_max", p.max_push_staleness},
               {"staleness_at_fetch_mean", p.mean_staleness},
               {"staleness_at_fetch_max", p.max_staleness},
               {"push_seconds", p.push_seconds},
               {"server_records", p.server_records},
               {"server_keys", p.server_keys},
               {"lost_examples", p.lost_examples},
               {"rounds", p.rounds},
               {"network_bytes", p.network_bytes}};
  }

  std::string result_text(const TrainConfig&, const TrainResult& r) const override {
    const auto& p = r.ps;
    std::string line = fmt::format(
        ", ps: {} pushes ({}), staleness at push mean {:.2f} max {}, at fetch mean {:.2f} max {}, "
        "{} coordinates in {} records a server",
        p.pushes, format_mib(p.bytes), p.mean_push_staleness, p.max_push_staleness,
        p.mean_staleness, p.max_staleness, fmt::join(p.server_keys, "/"),
        fmt::join(p.server_records, "/"));
    if (p.rounds)
      line += fmt::format(", {} server rounds ({} to other nodes)", p.rounds,
                          format_mib(p.network_bytes));
    if (p.lost_examples)
      line += fmt::format(", {} examples' updates lost with dead replicas", p.lost_examples);
    return line;
  }
};
}  // namespace

const ModeDef& ps_mode() {
  static const Ps mode;
  return mode;
}

}  // namespace hogwild::detail
