#include "modes/simulated/simulator.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <set>
#include <sstream>

#include "hogwild/error.hpp"
#include "hogwild/model_base.hpp"
#include "modes/mode_def.hpp"
#include "trainer/epoch_order.hpp"

namespace hogwild::detail {

CostModel default_cost_model() {
  CostModel c;
  // bench/calibrate_simulator.py on the 2-core Intel Xeon @ 2.50 GHz (AVX-512) this
  // was written on, 2026-11-28 (docs/EXPERIMENTS.md): serial 226 / 699 ns an example
  // at 10 / 100 non-zeros, and two real hogwild workers' 1.47M examples/s on the
  // RCV1-like set. Another machine measures its own (--cost-model).
  c.example_ns = 0.68;
  c.idle_ns = 172.25;
  c.read_ns = 2.938;
  c.write_ns = 2.938;
  c.coherence_ns = 16.6;
  c.source = "built-in (bench/calibrate_simulator.py, Intel Xeon @ 2.50 GHz, 2 cores, 2026-11-28)";
  return c;
}

CostModel read_cost_model(const std::string& path) {
  // A regular file only: the run reads it twice (its check before training, then the
  // first epoch), so a pipe would be empty the second time, and opening a named
  // pipe nobody writes would wait for ever.
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  if (!ec && kind != std::filesystem::file_type::regular)
    throw ConfigError(fmt::format("--cost-model {}: not a regular file (the run reads it before "
                                  "training and again as the first epoch starts; give a file)", path));
  std::ifstream in(path);
  if (!in) throw IoError(fmt::format("--cost-model {}: cannot be read", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  std::set<std::string> keys;  // the object's, so far: a key given twice is refused
  std::string twice;
  const nlohmann::json::parser_callback_t once = [&](int depth, nlohmann::json::parse_event_t event,
                                                     nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && parsed.is_string() &&
        !keys.insert(parsed.get<std::string>()).second && twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  try {
    j = nlohmann::json::parse(text.str(), once);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(fmt::format("--cost-model {}: not JSON: {}", path, e.what()));
  } catch (const nlohmann::json::out_of_range& e) {  // a number past a double: 1e400
    throw ConfigError(fmt::format("--cost-model {}: a number out of range: {}", path, e.what()));
  }
  if (!j.is_object())
    throw ConfigError(fmt::format("--cost-model {}: a JSON object of costs is wanted", path));
  if (!twice.empty())  // (JSON keeps the last, which may not be the one meant)
    throw ConfigError(fmt::format("--cost-model {}: {} is given twice", path, twice));
  CostModel c = default_cost_model();
  for (const auto& [key, value] : j.items()) {
    const auto cost = [&, &key = key, &value = value](double& field) {
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
        throw ConfigError(fmt::format("--cost-model {}: {} must be a number of nanoseconds >= 0, "
                                      "not {}", path, key, value.dump()));
      field = value.get<double>();
    };
    if (key == "example_ns") cost(c.example_ns);
    else if (key == "idle_ns") cost(c.idle_ns);
    else if (key == "read_ns") cost(c.read_ns);
    else if (key == "write_ns") cost(c.write_ns);
    else if (key == "coherence_ns") cost(c.coherence_ns);
    else if (key == "recent_writes") {
      // (A whole number however written: 64, 64.0 or 6.4e1, as a summary writes it.)
      const double n = value.is_number() ? value.get<double>() : -1;
      if (!(n >= 0 && n <= UINT32_MAX && n == std::floor(n)))
        throw ConfigError(fmt::format("--cost-model {}: recent_writes must be a whole number of "
                                      "writes from 0 to {}, not {}", path, UINT32_MAX, value.dump()));
      c.recent_writes = static_cast<std::uint64_t>(n);
    }
    else if (key == "queue") {
      if (!value.is_boolean())
        throw ConfigError(fmt::format("--cost-model {}: queue must be true or false, not {}", path,
                                      value.dump()));
      c.queue = value.get<bool>();
    }
    else if (key == "speed") {
      if (!value.is_array())
        throw ConfigError(fmt::format("--cost-model {}: speed must be an array of factors "
                                      "(one a worker, 1 = nominal)", path));
      if (value.size() > SimulationFigures::kSpeeds)
        throw ConfigError(fmt::format("--cost-model {}: at most {} speed factors, not {}", path,
                                      SimulationFigures::kSpeeds, value.size()));
      for (std::size_t i = 0; i < value.size(); ++i) {
        const auto& f = value[i];
        if (!f.is_number() || !std::isfinite(f.get<double>()) || f.get<double>() <= 0)
          throw ConfigError(fmt::format("--cost-model {}: speed[{}] must be a number > 0, not {}",
                                        path, i, f.dump()));
        c.speed.push_back(f.get<double>());
      }
    } else if (key != "machine" && key != "note" && key != "source") {  // (free text)
      throw ConfigError(fmt::format("--cost-model {}: unknown key {} (example_ns, idle_ns, "
                                    "read_ns, write_ns, coherence_ns, recent_writes, queue, speed, machine, "
                                    "note, source)", path, key));
    }
  }
  return c;
}

SimulatedAccess parse_simulated_access(const std::string& s) {
  if (s == "hogwild") return SimulatedAccess::hogwild;
  if (s == "atomic") return SimulatedAccess::atomic;
  if (s == "lock") return SimulatedAccess::lock;
  if (s == "striped") return SimulatedAccess::striped;
  throw ConfigError(fmt::format("--simulate-access {}: choose hogwild, atomic, lock or striped", s));
}

namespace {
// n floats in whole cache lines.
std::size_t line_floats(std::size_t n) {
  return (n + Simulator::kLineFloats - 1) / Simulator::kLineFloats * Simulator::kLineFloats;
}
}  // namespace

std::size_t Simulator::lines(std::span<const std::size_t> sizes, bool adagrad) {
  std::size_t total = 0;
  for (const std::size_t n : sizes) total += line_floats(n) * (adagrad ? 2 : 1);
  return total / kLineFloats;
}

Simulator::Simulator(Setup s) : s_(std::move(s)), workers_(s_.workers) {
  HOGWILD_ENFORCE_LE(s_.workers, 65534u);  // (the mode's check said so first: 16 bits a worker)
  std::size_t total = 0;
  for (const auto& t : s_.params.tensors()) {
    ranges_.push_back({t.data, t.size, total});
    total += line_floats(t.size);
    if (t.state) {
      ranges_.push_back({t.state, t.size, total});
      total += line_floats(t.size);
    }
  }
  std::sort(ranges_.begin(), ranges_.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  HOGWILD_ENFORCE_LE(total / kLineFloats, s_.lines.size());  // the arena's block, sized by lines()
  HOGWILD_ENFORCE_LE(workers_.size(), s_.stores.size());
  if (total > UINT32_MAX)  // (Pending::index)
    throw ConfigError(fmt::format("--mode simulated: a model of at most {} coordinates, its "
                                  "optimiser's state included, not {}", UINT32_MAX, total));
  // A step writes each coordinate at most a few times (a weight and its L2, the
  // optimiser's state): twice the model's coordinates is room for any.
  log_.capacity = 2 * total + 64;
  log_room_.reset(new SimulatedWrite[log_.capacity]);
  log_.writes = log_room_.get();
  log_.grow = grow_log;
  log_.owner = this;
  for (std::size_t k = 0; k < workers_.size(); ++k) {
    workers_[k].speed = k < s_.costs.speed.size() ? s_.costs.speed[k] : 1.0;
    if (s_.config.straggler_worker == static_cast<int>(k))
      workers_[k].speed *= s_.config.straggler_factor;
  }
  while (leaves_ < workers_.size()) leaves_ *= 2;
  if (leaves_ > 1) top_shift_ = static_cast<unsigned>(std::countr_zero(leaves_)) - 1;
  tree_.assign(2 * leaves_, kNone);
  if (s_.costs.queue)  // (an epoch starts after every write landed)
    line_free_.assign(total / kLineFloats, 0.0);
  if (s_.access == SimulatedAccess::striped) {
    HOGWILD_ENFORCE_LE(1u, s_.stripes);
    stripe_holder_.assign(s_.stripes, 0);
    stripe_waiters_.resize(s_.stripes);
  }
}

bool Simulator::grow_log(SimulatedLog& log) noexcept {
  auto& s = *static_cast<Simulator*>(log.owner);
  std::unique_ptr<SimulatedWrite[]> room(new (std::nothrow) SimulatedWrite[2 * log.capacity]);
  if (!room) return false;
  std::copy(log.writes, log.writes + log.size, room.get());
  s.log_room_ = std::move(room);
  log.writes = s.log_room_.get();
  log.capacity *= 2;
  return true;
}

bool Simulator::take_stripes(std::uint32_t k, const Batch& b) {
  std::vector<std::uint32_t>& held = workers_[k].stripes;
  batch_stripes(b, s_.stripes, held);  // as striped mode's workers take them
  for (const std::uint32_t s : held)
    if (stripe_holder_[s] != 0) {
      stripe_waiters_[s].push_back(k);
      held.clear();
      return false;
    }
  for (const std::uint32_t s : held) stripe_holder_[s] = k + 1;
  return true;
}

void Simulator::release_stripes(std::uint32_t k, double t) {
  std::vector<std::uint32_t>& held = workers_[k].stripes;
  for (const std::uint32_t s : held) {
    stripe_holder_[s] = 0;
    for (const std::uint32_t waiter : stripe_waiters_[s]) {
      // An event a tick after this instant: after this worker's (the earliest).
      Worker& w = workers_[waiter];
      w.phase = Worker::Phase::read;
      w.at = t + 1 / kTicks;
      const Event e = event(w.at, waiter);
      place(waiter, e);
      near_ = std::min(near_, e);  // (still no earlier than others_)
      if (others_known_) others_ = std::min(others_, e);
    }
    stripe_waiters_[s].clear();
  }
  held.clear();
}


std::vector<std::uint32_t>* simulated_reads = nullptr;

double Simulator::start_update(std::uint32_t k, double t) {
  Worker& w = workers_[k];
  if (w.pos >= w.rows.size()) {
    w.phase = Worker::Phase::done;
    return t;
  }
  // Lock: a worker that finds it held tries again a tick of the clock after the
  // holder lets go (after: the holder's own last event is at that instant).
  if (s_.access == SimulatedAccess::lock && (lock_held_ || t < lock_free_at_))
    return std::max(t, lock_free_at_) + 1 / kTicks;
  const std::size_t size = std::min<std::size_t>(std::max<std::size_t>(s_.config.batch, 1),
                                                 w.rows.size() - w.pos);
  const Batch b{data_, targets_, w.rows.data() + w.pos, size};
  if (s_.access == SimulatedAccess::striped && !take_stripes(k, b)) {
    w.phase = Worker::Phase::parked;
    return t;
  }
  if (simulated_reads) simulated_reads->insert(simulated_reads->end(), b.rows, b.rows + size);
  const float lr = step_size_.at_epoch_lr(epoch_lr_, w.seen * workers_.size());
  const StepKind kind{access_index<SimulatedUpdate>(), static_cast<std::uint8_t>(s_.config.optimizer)};
  log_.size = 0;
  simulated_log = &log_;
  loss_ += s_.model.train_batch(kind, b, s_.params, lr);
  simulated_log = nullptr;
  if (log_.overflow)
    throw ResourceError(fmt::format("--mode simulated: out of memory for one update's writes "
                                    "(more than {})", log_.capacity));
  std::uint64_t nnz = 0;
  for (std::size_t i = 0; i < size; ++i) nnz += b.row(i).nnz;
  const std::size_t writes = log_.size;
  w.sampled = probes_[k].due();
  w.nnz = nnz;
  w.size = size;
  w.committed_at_read = committed_;
  ++read_;
  const double compute =
      (s_.costs.example_ns + s_.costs.read_ns * static_cast<double>(std::max<std::uint64_t>(nnz, writes))) *
      w.speed;
  w.next = 0;
  w.phase = Worker::Phase::load;  // (with no writes left, the next act finishes the update)
  w.writes.resize(writes);
  for (std::size_t i = 0; i < writes; ++i) {
    const SimulatedWrite& x = log_.writes[i];
    const std::size_t index = index_of(x.p);
    w.writes[i] = {x.p, x.d, static_cast<std::uint32_t>(index)};
  }
  // Lock, or an update that ends before any other worker's next event (K = 1
  // always): nothing can come between its read and its last write, so the writes
  // the step made stand, each landing at its time.
  // (The test takes every write's line as another's: an end no earlier than the
  // real one, which the writes then reach, each line k's after its first.)
  // (The bound only grows: the test stops at the first write past another's event.)
  const bool solo = s_.access == SimulatedAccess::lock || workers_.size() == 1 || [&] {
    double end = t + compute;
    for (const Pending& x : w.writes) {
      if (!first(end, k)) return false;
      end = write_done_at_most(k, x.index, end);
    }
    return first(end, k);
  }();
  if (solo) {
    double solo_end = t + compute;
    for (const Pending& x : w.writes) {
      solo_end = write_done(k, x.index, solo_end);
      s_.figures.sample_writes += in_sample(x.index);
    }
    s_.figures.writes += writes;
    w.writes.clear();
    if (s_.access == SimulatedAccess::lock) {
      lock_free_at_ = solo_end;
      lock_held_ = true;
    }
    return solo_end;
  }
  // Taken back, newest first, to be made again when the clock says they land.
  for (std::size_t i = writes; i-- > 0;) *log_.writes[i].p = log_.writes[i].old;
  return t + compute;
}

double Simulator::finish_update(std::uint32_t k, double t) {
  Worker& w = workers_[k];
  SimulationFigures& f = s_.figures;
  const std::uint64_t lag = committed_ - w.committed_at_read;
  const std::uint64_t overlap = read_ - w.committed_at_read - 1;
  ++committed_;
  ++f.updates;
  f.examples += w.size;
  f.lag_sum += static_cast<double>(lag);
  f.overlap_sum += static_cast<double>(overlap);
  f.lag_max = std::max(f.lag_max, lag);
  f.overlap_max = std::max(f.overlap_max, overlap);
  ++f.lag[std::min<std::uint64_t>(lag, SimulationFigures::kHistogram - 1)];
  ++f.overlap[std::min<std::uint64_t>(overlap, SimulationFigures::kHistogram - 1)];
  if (w.sampled) probes_[k].record(lag, overlap, w.nnz);
  w.pos += w.size;
  w.seen += w.size;
  w.phase = Worker::Phase::read;
  lock_held_ = false;  // (lock: the holder is the one finishing)
  if (s_.access == SimulatedAccess::striped) release_stripes(k, t);
  return t + s_.costs.idle_ns * w.speed;  // the next update's read
}

// Worker k's writes from its next one, at time t: each a load, then a store a
// write's cost later. While no other worker's event comes before a write's store,
// its load and store are made at once (nothing can land in between); otherwise the
// load is made and the store is the worker's next event.
inline double Simulator::writes_from(std::uint32_t k, double t) {
  Worker& w = workers_[k];
  while (w.next < w.writes.size()) {
    const Pending& x = w.writes[w.next];
    const bool atomic = s_.access == SimulatedAccess::atomic;
    const double store_at = write_done(k, x.index, t);
    // Atomic: one read-modify-write, nothing lost; hogwild with no other event before
    // its store: nothing can land in between either.
    if (atomic || first(store_at, k)) {
      *x.p += x.d;
      ++s_.figures.writes;
      s_.figures.sample_writes += in_sample(x.index);
      ++w.next;
      t = store_at;
      if (atomic && !first(t, k)) return t;  // the next write waits for the others' events
      continue;
    }
    w.loaded = *x.p;
    w.phase = Worker::Phase::store;
    // Fetched while other workers' events run: its next write's coordinate and line
    // (their record was fetched an event ago), and the record of the write after.
    if (w.next + 1 < w.writes.size()) {
      prefetch(w.writes[w.next + 1]);
      __builtin_prefetch(w.writes.data() + w.next + 2);
    }
    return store_at;
  }
  return finish_update(k, t);
}

inline double Simulator::act(std::uint32_t k, double t) {
  Worker& w = workers_[k];
  switch (w.phase) {
    case Worker::Phase::read:
      return start_update(k, t);
    case Worker::Phase::load:
      return writes_from(k, t);
    case Worker::Phase::store: {
      const Pending& x = w.writes[w.next];
      const bool sampled = in_sample(x.index);
      s_.figures.sample_writes += sampled;
      // Another worker's store changed it since our load: that change is overwritten.
      if (std::bit_cast<std::uint32_t>(*x.p) != std::bit_cast<std::uint32_t>(w.loaded)) {
        ++s_.figures.lost_writes;
        s_.figures.sample_conflicts += sampled;
        s_.figures.lost_mass += std::fabs(static_cast<double>(*x.p) - static_cast<double>(w.loaded));
      }
      *x.p = w.loaded + x.d;
      ++s_.figures.writes;
      ++w.next;
      w.phase = Worker::Phase::load;
      return writes_from(k, t);  // the next write's load at once
    }
    case Worker::Phase::parked:
    case Worker::Phase::done:
      return t;
  }
  return t;
}

double Simulator::epoch(const Dataset& data, std::span<const std::uint32_t> rows,
                        const float* targets, const StepSize& step_size, unsigned e,
                        const std::atomic<std::int32_t>* stop, std::atomic<std::uint64_t>* samples) {
  s_.model.check_rows(data);
  data_ = &data;
  targets_ = targets;
  step_size_ = step_size;
  epoch_lr_ = step_size.epoch_start(e);
  loss_ = 0;
  const auto K = static_cast<unsigned>(workers_.size());
  for (unsigned k = 0; k < K; ++k) {
    Worker& w = workers_[k];
    epoch_rows(s_.config.partition, data.rows(), K, k, s_.config.seed, e, w.rows);
    w.pos = 0;
    w.seen = std::uint64_t{e} * w.rows.size();
    w.phase = Worker::Phase::read;
  }
  // The instruments' samples: the coordinates once (at the run's first epoch, on
  // these rows), the updates with a probe a worker, seeded by the run and the epoch.
  SimulationFigures& f = s_.figures;
  if (!f.sample_chosen) {
    choose_conflict_sample(reinterpret_cast<std::byte*>(&f.conflict_sample), s_.model.parameters(),
                           data, s_.model.feature_indexed(), s_.config.conflict_k, s_.config.seed);
    f.sample_chosen = true;
  }
  f.telemetry_every = s_.config.telemetry_every;
  for (std::uint32_t c = 0; c < f.conflict_sample.count; ++c) {
    const SampledCoordinate& x = f.conflict_sample.coordinates[c];
    const std::size_t i = index_of(s_.params.data(x.tensor) + x.index);
    s_.lines[i / kLineFloats].sampled |= static_cast<std::uint16_t>(1u << (i % kLineFloats));
  }
  probes_.clear();
  probes_.reserve(K);
  for (unsigned k = 0; k < K; ++k)
    probes_.emplace_back(std::span<const WorkerProgress>{}, k, f.sampled, s_.config.telemetry_every,
                         s_.config.seed * 1000003 + e);
  s_.model.begin_epoch(rows);
  // The worker's published count: what the run had before this epoch (a resumed
  // run's earlier epochs included), plus this epoch's examples.
  const std::uint64_t base = samples ? samples->load(std::memory_order_relaxed) : 0;
  const std::uint64_t before = s_.figures.examples;
  const auto publish = [&] {
    if (samples) samples->store(base + s_.figures.examples - before, std::memory_order_relaxed);
  };
  const double t0 = s_.figures.seconds * 1e9;
  // Each worker's first event at t0, in the tournament tree (workers_.size()
  // leaves of leaves_ in use).
  for (std::uint32_t k = 0; k < K; ++k) {
    workers_[k].at = t0;
    tree_[leaves_ + k] = event(t0, k);
  }
  for (std::size_t i = leaves_; i-- > 1;) tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
  double now = t0;
  std::uint64_t steps = 0;
  while (tree_[1] != kNone) {
    if ((++steps & 4095) == 0) {
      if (stop && stop->load(std::memory_order_relaxed)) break;
      publish();
    }
    const auto k = static_cast<std::uint32_t>(tree_[1] & 0xffff);
    Worker& w = workers_[k];
    now = w.at;
    others_known_ = false;
    near_ = leaves_ > 1 ? tree_[((leaves_ + k) >> top_shift_) ^ 1] : kNone;
    if (near_ != kNone) {
      // A worker that may act next (the earliest of the other half): its write's
      // line and coordinate fetched while this one acts.
      const Worker& n = workers_[near_ & 0xffff];
      if (n.next < n.writes.size()) prefetch(n.writes[n.next]);
    }
    w.at = act(k, w.at);
    place(k, w.phase == Worker::Phase::done || w.phase == Worker::Phase::parked ? kNone
                                                                                : event(w.at, k));
  }
  // (A stop leaves events behind: the next epoch begins with every worker's.)
  s_.model.end_epoch();
  s_.figures.seconds = std::max(now, lock_free_at_) * 1e-9;
  publish();
  return loss_;
}

}  // namespace hogwild::detail
