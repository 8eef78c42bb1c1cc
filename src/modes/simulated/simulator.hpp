// --mode simulated: K virtual Hogwild! workers in one process, on a simulated clock.
//
// Each virtual worker trains its share of each epoch's order (the rows a real
// worker of K would get: epoch_rows) with the same model, optimiser and step sizes
// as the real modes. An update is a sequence of timed events:
//   1. read: the step runs at once on the weights as the simulated schedule has
//      committed them (SimulatedUpdate: serial's arithmetic, every write logged),
//      then its writes are taken back;
//   2. compute: the clock moves on by the cost model's time for the update's reads
//      and its fixed cost;
//   3. write, one coordinate at a time: a load, and a store of the loaded value
//      plus the logged change a write's cost later (more when the coordinate's
//      cache line was last written by another worker, and recently: CostModel::
//      recent_writes).
// Events are taken in order of simulated time (ties by worker): another worker's
// store that lands between a coordinate's load and its store is overwritten, a
// lost update, exactly as on hardware. Under --simulate-access atomic a write is
// one event (nothing lost); under lock a worker holds one lock from its read to its
// last write, so updates happen one at a time, in the order the workers took it;
// under striped (striped mode's locks: a lock per stripe of features, feature j in
// stripe j mod --stripes) a worker takes the stripes its rows' features fall in
// before its read, all at once, and lets them go at its last write. A worker that
// finds one held waits, parked, until the holder lets go, then tries again a tick of
// the clock later (the holder's own last event is at that instant). Its writes are
// hogwild's: those to coordinates outside its stripes (a bias) may be lost.
// The same seed gives the same events and so the same weights, bit for bit; with
// K = 1 nothing interleaves and the weights are serial's.
//
// Measured exactly, for every update: its lag (Niu et al.'s tau: the updates of
// other workers that completed between its read and its last write), its overlap
// (Mania et al.: the updates whose read-to-last-write interval meets its own), and
// the writes it lost to others (the lost mass: the size of the changes a store
// overwrote).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hogwild/batch.hpp"
#include "hogwild/error.hpp"
#include "hogwild/model.hpp"
#include "hogwild/param_set.hpp"
#include "hogwild/step_size.hpp"
#include "hogwild/trainer.hpp"
#include "hogwild/update_policy.hpp"
#include "science/conflicts.hpp"
#include "trainer/staleness.hpp"

namespace hogwild::detail {

// What an update costs in simulated nanoseconds. Every cost of a worker is
// multiplied by its speed factor (speed[k], 1 where absent; 2: half as fast).
struct CostModel {
  double example_ns = 0;    // fixed, per update, between its read and its writes (the loss)
  double idle_ns = 0;       // fixed, per update, before its read (the loop, the row's
                            // fetch): time outside the read-to-last-write window
  double read_ns = 0;       // per coordinate read
  double write_ns = 0;      // per coordinate written: its load-add-store
  double coherence_ns = 0;  // added to a write whose cache line another worker wrote last
  // N > 0: a write to a line another worker wrote last is a move only while that
  // worker has made fewer than N writes since (the line is still being written
  // there); after that it comes from the shared cache at no more than serial's
  // cost. 0 (the built-in): a move however long ago the other worker wrote it.
  std::uint64_t recent_writes = 0;
  // true: a line moves to one writer at a time, so a write that moves it waits until
  // the line's previous move is done (a queue a contended line). false (the
  // built-in, which the calibration fitted): every move at once, however many
  // workers want the line.
  bool queue = false;
  std::vector<double> speed;
  std::string source;       // the built-in ones': where they were measured, for the summary
};

// The built-in costs (docs/EXPERIMENTS.md says where they were measured).
CostModel default_cost_model();
// A --cost-model file: a JSON object with any of example_ns, idle_ns, read_ns, write_ns,
// coherence_ns (finite, >= 0), recent_writes (a whole number, 0 to 2^32 - 1), queue
// (true or false) and speed (an array of numbers > 0), the built-in value for each
// one left out, and machine, note and source as free text (a summary's
// simulation.cost_model is such a file). ConfigError naming the file and the key
// for anything else, or for a path that is not a regular file (a pipe: the run reads
// the file twice); IoError when it cannot be read.
CostModel read_cost_model(const std::string& path);

enum class SimulatedAccess : std::uint8_t { hogwild, atomic, lock, striped };
SimulatedAccess parse_simulated_access(const std::string& s);  // ConfigError naming the choices

// The run's figures, kept in the run's arena (block "simulation") so that the
// mode's collect() finds them: histograms of lag and overlap (exact below
// kHistogram, counted in the last bucket above it, whose max is exact).
struct SimulationFigures {
  static constexpr std::size_t kHistogram = 4096;
  static constexpr std::size_t kSpeeds = 4096;  // a cost model's speed factors, at most
  // The cost model, read once at the first epoch (a file changed or gone later
  // changes nothing).
  bool costs_read = false;
  double idle_ns = 0, example_ns = 0, read_ns = 0, write_ns = 0, coherence_ns = 0;
  bool queue = false;
  std::uint64_t recent_writes = 0;
  std::uint32_t speeds = 0;
  double speed[kSpeeds] = {};
  double seconds = 0;  // simulated time, all epochs
  std::uint64_t updates = 0, writes = 0, lost_writes = 0, examples = 0;
  std::uint64_t moves = 0;  // writes that paid coherence_ns (a line another worker wrote)
  double lost_mass = 0;  // sum of |the changes overwritten|
  std::uint64_t lag_max = 0, overlap_max = 0;
  double lag_sum = 0, overlap_sum = 0;
  std::uint64_t lag[kHistogram] = {}, overlap[kHistogram] = {};
  // What the sampling instruments would report on this schedule: --telemetry's
  // sample of the updates (its geometric gaps of mean telemetry_every, a probe a
  // worker), in its record; --conflicts' sample of the coordinates (its choice:
  // the biases, the top conflict_k features by degree, conflict_k random ones),
  // with the writes to them and those lost.
  StalenessRecord sampled{};
  std::uint32_t telemetry_every = 0;
  bool sample_chosen = false;
  ConflictBlock conflict_sample{};
  std::uint64_t sample_writes = 0, sample_conflicts = 0;
};

// For tests: where set, every update appends its rows as it reads them, in the
// order of simulated time (under lock, the order the updates ran in, one at a time).
extern std::vector<std::uint32_t>* simulated_reads;

class Simulator {
 public:
  // A cache line: its last writer (worker + 1; 0: none yet), which of its
  // coordinates --conflicts' sample holds (bit j: the line's j-th), side by side so
  // that a write finds both in one fetch, and the writer's count of writes at that
  // write (for CostModel::recent_writes).
  struct LineState {
    std::uint16_t owner;
    std::uint16_t sampled;
    std::uint32_t stamp;
  };
  struct Setup {
    Model& model;
    const ParamSet& params;
    const TrainConfig& config;
    SimulatedAccess access;
    CostModel costs;
    unsigned workers;  // K
    unsigned stripes;  // under striped: how many (striped mode's --stripes)
    // Kept across epochs in the run's arena: the figures, and each cache line's
    // state, lines() of them.
    SimulationFigures& figures;
    std::span<LineState> lines;
    std::span<std::uint32_t> stores;  // each worker's writes so far, workers of them
  };
  static constexpr std::size_t kLineFloats = 16;  // 64-byte cache lines
  // The cache lines the simulator tracks for a model of these tensors: each tensor,
  // and with AdaGrad its state, from a line of its own.
  static std::size_t lines(std::span<const std::size_t> tensor_sizes, bool adagrad);
  explicit Simulator(Setup s);

  // One epoch of every virtual worker over `data` (its rows split among them as a
  // real run's), starting at simulated time figures.seconds. Returns the epoch's
  // summed training loss (each example's before its update). Stops early, with the
  // epoch's updates so far made, when *stop is set.
  // `rows`: the epoch's rows (the model's begin_epoch sees them).
  double epoch(const Dataset& data, std::span<const std::uint32_t> rows, const float* targets,
               const StepSize& step_size, unsigned e, const std::atomic<std::int32_t>* stop,
               std::atomic<std::uint64_t>* samples);

 private:
  // A write of the update in flight: the coordinate, the change the step made to it,
  // and its index (index_of). 16 bytes, in the order the step wrote them.
  struct Pending {
    float* p;
    float d;
    std::uint32_t index;
  };
  struct Worker {
    std::vector<std::uint32_t> rows;
    std::size_t pos = 0;      // next row
    std::uint64_t seen = 0;   // examples trained, all epochs (the step size's count)
    // parked: waiting for a stripe (under striped), with no event until its holder
    // lets go.
    enum class Phase : std::uint8_t { read, load, store, parked, done } phase = Phase::read;
    std::vector<std::uint32_t> stripes;  // under striped: those it holds, ascending
    bool sampled = false;  // the update in flight is in --telemetry's sample
    std::uint64_t nnz = 0;  // its rows' non-zeros
    std::vector<Pending> writes;  // the update in flight
    std::size_t next = 0;         // its next write
    float loaded = 0;                    // the value its write in flight loaded
    std::uint64_t committed_at_read = 0, size = 0;
    double speed = 1;
    double at = 0;  // when its next event is
  };
  // An event: its time in sixteenths of a nanosecond above the worker's number (16
  // bits), one integer to compare (the time itself is the worker's `at`). 2^48
  // sixteenths: 4.9 hours of simulated time. kNone: a worker with no event (done, or
  // parked).
  using Event = std::uint64_t;
  static constexpr Event kNone = ~Event{0};
  static constexpr double kTicks = 16;
  Event event(double t, std::uint32_t k) const {
    const double ticks = t * kTicks;
    if (!(ticks < 281474976710656.0))  // 2^48
      throw ResourceError("--mode simulated: the simulated clock passed 4.9 hours, its limit");
    return (static_cast<std::uint64_t>(ticks) << 16) | k;
  }
  // Coordinate `p`'s index (its cache line's in lines: index / kLineFloats).
  std::size_t index_of(const float* p) const noexcept {
    for (const Range& r : ranges_)
      if (p >= r.begin && p < r.begin + r.size) return r.base + static_cast<std::size_t>(p - r.begin);
    return 0;  // not a tensor's: cannot happen (the steps write only the tensors)
  }
  // One step of worker k (the earliest event) at time t; returns when its next event is.
  // (Inlined into the event loop: taken together they are an event.)
  [[gnu::always_inline]] inline double act(std::uint32_t k, double t);
  [[gnu::always_inline]] inline double writes_from(std::uint32_t k, double t);
  // Whether an event of worker k (the earliest) at time t comes before every other
  // worker's next event (others_, the earliest of them). The order of events: by
  // time to a sixteenth of a nanosecond, ties to the lower worker (a function of the
  // seed). With many workers the answer is mostly no, and the earliest event of the
  // tree's other half (near_, no earlier than others_) gives it; others_ is found
  // (others_of) only for an event before that one.
  bool first(double t, std::uint32_t k) {  // (event() throws past the clock's limit)
    const Event e = event(t, k);
    if (e >= near_) return false;
    if (!others_known_) {
      others_ = others_of(k);
      others_known_ = true;
    }
    return e < others_;
  }
  double start_update(std::uint32_t k, double t);
  double finish_update(std::uint32_t k, double t);
  // When a write of worker k to coordinate `index` whose load is at t lands: a
  // write's cost later, and where another worker wrote its line last, the line's
  // move (coherence_ns) too. With the queue a line moves to one writer at a time:
  // the move begins once the line is free (the previous move done, and its owner's
  // stores landed), and the line is busy until this store lands. The load is at t
  // all the same (a plain load needs no ownership), so a store of another worker
  // that lands while this one waits for the line is lost, as on hardware.
  double write_done(std::uint32_t k, std::size_t index, double t) noexcept {
    const std::size_t line = index / kLineFloats;
    LineState& l = s_.lines[line];
    const double speed = workers_[k].speed;
    const std::uint32_t owner = l.owner;
    l.owner = static_cast<std::uint16_t>(k + 1);
    bool left = false;  // its last writer has made recent_writes writes since
    if (s_.costs.recent_writes != 0) {
      // (Counts wrap at 2^32: a difference of unsigned counts is right across the wrap.)
      left = owner != 0 && s_.stores[owner - 1] - l.stamp >= s_.costs.recent_writes;
      l.stamp = ++s_.stores[k];
    }
    if (owner == 0 || owner == k + 1 || left) {
      const double done = t + s_.costs.write_ns * speed;
      if (s_.costs.queue) line_free_[line] = std::max(line_free_[line], done);
      return done;
    }
    ++s_.figures.moves;
    const double start = s_.costs.queue ? std::max(t, line_free_[line]) : t;
    const double done = start + (s_.costs.write_ns + s_.costs.coherence_ns) * speed;
    if (s_.costs.queue) line_free_[line] = done;
    return done;
  }
  // Fetches a pending write's coordinate and its line's state, ahead of its event.
  void prefetch(const Pending& x) const noexcept {
    __builtin_prefetch(x.p, 1);
    __builtin_prefetch(&s_.lines[x.index / kLineFloats], 1);
  }
  // No earlier than write_done's answer for any owner of the line, and changing
  // nothing: every write taken as a move.
  double write_done_at_most(std::uint32_t k, std::size_t index, double t) const noexcept {
    const double start = s_.costs.queue ? std::max(t, line_free_[index / kLineFloats]) : t;
    return start + (s_.costs.write_ns + s_.costs.coherence_ns) * workers_[k].speed;
  }
  std::vector<double> line_free_;  // with the queue, per line: when its latest move is done

  Setup s_;
  std::vector<Worker> workers_;
  // The events, one a worker, in a tournament tree: leaves_ leaves (K rounded up to a
  // power of two) at tree_[leaves_ + k], each node above the earlier of its two
  // children, the earliest event at tree_[1]. A worker's new event climbs its path
  // comparing with the siblings only: log2 K steps with no branch on the data, where
  // a heap's sift branches twice a level. others_: while worker k acts, the earliest
  // of the other workers' events (the siblings on its path), once others_known_;
  // near_: the earliest event of the half of the tree k is not in (tree_[2] or
  // tree_[3]; kNone with one leaf), one load an event.
  std::vector<Event> tree_;
  std::size_t leaves_ = 1;
  unsigned top_shift_ = 0;  // leaf >> top_shift_: its half's node, 2 or 3 (log2 leaves_ - 1)
  Event others_ = kNone, near_ = kNone;
  bool others_known_ = false;
  void place(std::uint32_t k, Event e) noexcept {
    std::size_t i = leaves_ + k;
    tree_[i] = e;
    for (; i > 1; i >>= 1) {
      e = std::min(e, tree_[i ^ 1]);
      tree_[i >> 1] = e;
    }
  }
  Event others_of(std::uint32_t k) const noexcept {
    Event e = kNone;
    for (std::size_t i = leaves_ + k; i > 1; i >>= 1) e = std::min(e, tree_[i ^ 1]);
    return e;
  }
  struct Range {
    const float* begin;
    std::size_t size, base;
  };
  std::vector<Range> ranges_;             // the tensors and their optimiser state
  std::unique_ptr<SimulatedWrite[]> log_room_;  // not value-initialised: pages untouched
  SimulatedLog log_;
  static bool grow_log(SimulatedLog& log) noexcept;  // (SimulatedLog::grow: twice the room)
  // Per epoch: the data and step sizes the steps read.
  const Dataset* data_ = nullptr;
  const float* targets_ = nullptr;
  StepSize step_size_{};
  double epoch_lr_ = 0;
  double loss_ = 0;
  std::uint64_t committed_ = 0, read_ = 0;  // updates finished, updates begun
  double lock_free_at_ = 0;                 // lock: when the holder lets go
  bool lock_held_ = false;
  // --telemetry's sampling, a probe a worker (its `due`, and its record of a
  // sampled update's exact figures); --conflicts' sampled coordinates, a bit each
  // in their line's state (LineState::sampled).
  std::vector<StalenessProbe> probes_;
  bool in_sample(std::size_t index) const noexcept {
    return (s_.lines[index / kLineFloats].sampled >> (index % kLineFloats)) & 1;
  }
  // Under striped: each stripe's holder (worker + 1; 0: free) and the workers parked
  // until it lets go.
  std::vector<std::uint32_t> stripe_holder_;
  std::vector<std::vector<std::uint32_t>> stripe_waiters_;
  // Under striped: takes the stripes of worker k's next batch, or parks it on the
  // first one held (false). `b`: the batch.
  bool take_stripes(std::uint32_t k, const Batch& b);
  // Lets worker k's stripes go at time t: those parked on them act a tick later.
  void release_stripes(std::uint32_t k, double t);
};

}  // namespace hogwild::detail
