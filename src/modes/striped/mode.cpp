// striped: a lock per stripe of coordinates (--stripes K). Each mini-batch holds the
// stripes its rows' features fall in (feature j in stripe j mod K), taken in
// increasing order, around its read, gradient and update; a batch on other stripes
// runs meanwhile. K = 1 is lock mode (one lock around every batch); as K grows, only
// batches that share a stripe wait for each other: the lock granularity that
// studies sweep between lock and hogwild. Dense rows touch every feature, so every
// stripe. Coordinates not tied to one feature (a bias, the MLP's hidden layers) are
// written as hogwild writes them, relaxed, under whatever stripes the batch holds.
//
// Everything the mode is lives here: its option, its arena block (the K robust
// mutexes, one a cache line) and its part of the step loop (trainer/epoch_part.hpp).
#include <algorithm>
#include <new>
#include <span>
#include <vector>

#include "hogwild/error.hpp"
#include "hogwild/model_base.hpp"
#include "memory/robust_mutex.hpp"
#include "modes/hogwild/writer_parts.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {

// One stripe's lock, on a cache line of its own (a lock shared with a neighbour
// stripe's would make their batches contend).
struct alignas(64) Stripe {
  RobustMutex mutex;
};

std::span<Stripe> stripes_in(Arena& arena, std::size_t k) {
  return {std::launder(reinterpret_cast<Stripe*>(arena.block("stripes").data())), k};
}

class StripedPart final : public EpochPart {
 public:
  explicit StripedPart(std::span<Stripe> stripes) : stripes_(stripes) {}

  void enter_step(const Batch& b) override {
    batch_stripes(b, stripes_.size(), held_);  // ascending: no deadlock
    for (std::uint32_t s : held_) stripes_[s].mutex.lock();
  }

  void leave_step() override {
    for (auto s = held_.rbegin(); s != held_.rend(); ++s) stripes_[*s].mutex.unlock();
    held_.clear();
  }

 private:
  std::span<Stripe> stripes_;
  std::vector<std::uint32_t> held_;  // the stripes the batch in its step holds, ascending
};

class Striped final : public ModeDef {
 public:
  std::string_view name() const override { return "striped"; }
  std::string_view summary() const override {
    return "a lock per stripe of features around each mini-batch (--stripes)";
  }
  // Relaxed loads and stores: what a batch writes outside its stripes (a bias) races.
  std::uint8_t access() const override { return access_index<HogwildUpdate>(); }
  std::vector<ModeOption> options() const override { return {stripes_option()}; }
  void check(const TrainConfig& cfg) const override {
    if (cfg.hot_k > 0)
      throw ConfigError("--hot-k does not apply to --mode striped: the hot window's flushes "
                        "would write the shared weights holding no stripe");
  }
  void arena_blocks(const ModeArena& a, std::vector<BlockSpec>& blocks) const override {
    blocks.push_back({"stripes", sizeof(Stripe) * stripes(a.config)});
  }
  void init_blocks(const ModeArena& a, Arena& arena) const override {
    const std::size_t k = stripes(a.config);
    auto* s = new (arena.block("stripes").data()) Stripe[k];
    for (std::size_t i = 0; i < k; ++i) s[i].mutex.init();
  }
  // Its stripes, then hogwild's options: across nodes, the node sync.
  void make_parts(const ModeWorker& w, std::vector<std::unique_ptr<EpochPart>>& parts) const override {
    ModeDef::make_parts(w, parts);
    add_writer_parts(w, *this, parts);
  }
  std::unique_ptr<EpochPart> make_part(const ModeWorker& w) const override {
    return std::make_unique<StripedPart>(stripes_in(w.arena, stripes(w.config)));
  }

 private:
  static std::size_t stripes(const TrainConfig& cfg) {
    return static_cast<std::size_t>(mode_option(cfg, "stripes"));
  }
};

}  // namespace

void batch_stripes(const Batch& b, std::size_t n, std::vector<std::uint32_t>& out) {
  out.clear();
  for (std::size_t i = 0; i < b.size; ++i) {
    const RowView row = b.row(i);
    if (row.dense()) {  // every feature: every stripe
      out.resize(n);
      for (std::size_t s = 0; s < n; ++s) out[s] = static_cast<std::uint32_t>(s);
      return;
    }
    for (std::uint32_t j = 0; j < row.nnz; ++j) out.push_back(static_cast<std::uint32_t>(row.index[j] % n));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

ModeOption stripes_option() {
  // At most 1,024: a batch of dense rows holds every stripe, and the kernel frees a
  // dead worker's robust mutexes only among the first 2,048 it held
  // (ROBUST_LIST_LIMIT): beyond, a killed worker's stripes would stay locked.
  return {"stripes", 1, 1024, 64,
          "Locks over the features, each held around the mini-batches whose rows have a "
          "feature in its stripe (feature j in stripe j mod N)"};
}

const ModeDef& striped_mode() {
  static const Striped mode;
  return mode;
}

}  // namespace hogwild::detail
