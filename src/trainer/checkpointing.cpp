// Between a running Run and a Checkpoint: capture (the parent, while workers may
// run) and restore (before any worker starts).
#include <fmt/format.h>

#include <algorithm>

#include "trainer/run.hpp"

namespace hogwild::detail {

WorkerState read_record(const WorkerProgress& p, const double* losses, std::uint64_t share) {
  WorkerState s;
  for (;;) {  // the reader's half of the seqlock (record_write_begin/end)
    const std::uint32_t seq = p.seq.load(std::memory_order_acquire);
    if (seq & 1) continue;  // a publication is under way
    s.epoch = p.epoch.load(std::memory_order_relaxed);
    s.position = p.position.load(std::memory_order_relaxed);
    s.loss = p.loss.load(std::memory_order_relaxed);
    s.epochs_done = p.epochs_done.load(std::memory_order_relaxed);
    fence(std::memory_order_acquire);  // the fields before seq again
    if (p.seq.load(std::memory_order_relaxed) == seq) break;
  }
  // The examples of the epochs before and of this one's published position (the
  // live counter runs ahead of it between publications: it moves every batch).
  s.samples = std::uint64_t{s.epoch} * share + s.position;
  if (losses) s.epoch_loss.assign(losses, losses + s.epochs_done);
  return s;
}

std::vector<Run::SavedTensor> Run::saved_tensors() const {
  std::vector<SavedTensor> out;
  for (const auto& t : params.tensors()) {
    out.push_back({param_block(t.name), t.data, t.size, t.space, t.dtype});
    if (t.state) out.push_back({state_block(t.name), t.state, t.size, t.space, Dtype::f32});
  }
  return out;
}

void Run::write_checkpoint(const std::string& path, double train_seconds,
                           unsigned restarts) const {
  Checkpoint c;
  c.config = config_fingerprint(cfg);
  c.data = data_fingerprint();
  c.restarts = restarts;
  c.train_seconds = train_seconds;
  // Records first, then the weights: the weights may hold updates of rows after
  // the recorded positions, which a resume trains again (Hogwild tolerates that).
  std::uint64_t samples = 0;
  for (unsigned w = 0; w < workers; ++w) {
    const auto [begin, end] = partition(w);
    c.workers.push_back(read_record(progress[w], epoch_loss.data() + w * cfg.epochs, end - begin));
    samples += c.workers.back().samples;
  }
  std::vector<TensorSource> tensors;
  for (const auto& s : saved_tensors())
    tensors.push_back({s.name, s.size, [this, s, samples](std::size_t begin, std::size_t n, float* out) {
                         read_values(s.space, s.dtype, s.data, begin, n, out);
                         const std::size_t bad = first_non_finite(out, n);
                         if (bad == n) return;
                         throw divergence(
                             cfg, fmt::format("{}[{}] = {}", s.name.substr(s.name.find(':') + 1),
                                              begin + bad, out[bad]),
                             static_cast<double>(samples) / static_cast<double>(train.rows()) + 1e-9,
                             samples);
                       }});
  hogwild::write_checkpoint(c, tensors, path);
}

unsigned Run::restore(const Checkpoint& c, const std::string& path) {
  auto fail = [&](const std::string& what) {
    return ConfigError(fmt::format("cannot resume from {}: {}", path, what));
  };
  if (c.workers.size() != workers)
    throw fail(fmt::format("it has {} workers, this run {}", c.workers.size(), workers));
  const auto saved = saved_tensors();
  for (auto& t : c.tensors)
    if (std::none_of(saved.begin(), saved.end(), [&](auto& s) { return s.name == t.name; }))
      throw fail(fmt::format("it holds tensor \"{}\", which model {} does not have", t.name,
                             model.name()));
  for (const auto& s : saved) {
    auto it = std::find_if(c.tensors.begin(), c.tensors.end(), [&](auto& t) { return t.name == s.name; });
    if (it == c.tensors.end()) throw fail(fmt::format("it has no tensor \"{}\"", s.name));
    if (it->values.size() != s.size)
      throw fail(fmt::format("tensor \"{}\" has {} values there and {} in model {}", s.name,
                             it->values.size(), s.size, model.name()));
    write_values(s.space, s.dtype, s.data, 0, it->values.data(), s.size);
  }
  for (unsigned w = 0; w < workers; ++w) {
    const WorkerState& s = c.workers[w];
    auto [begin, end] = partition(w);
    if (s.position > end - begin || s.epochs_done > s.epoch + 1 || s.epoch_loss.size() != s.epochs_done)
      throw fail(fmt::format("worker {}'s record is inconsistent", w));
    WorkerProgress& p = progress[w];
    p.epochs_done.store(std::min(s.epochs_done, cfg.epochs), std::memory_order_relaxed);
    p.counted.store(std::min(s.epochs_done, cfg.epochs), std::memory_order_relaxed);
    p.epoch.store(s.epoch, std::memory_order_relaxed);
    p.position.store(s.position, std::memory_order_relaxed);
    p.loss.store(s.loss, std::memory_order_relaxed);
    p.samples.store(s.samples, std::memory_order_relaxed);
    for (std::size_t e = 0; e < std::min<std::size_t>(s.epochs_done, cfg.epochs); ++e) {
      epoch_loss[w * cfg.epochs + e] = s.epoch_loss[e];
      if (!finishers.empty()) finishers[e].fetch_add(1, std::memory_order_relaxed);
    }
  }
  return c.restarts;
}

}  // namespace hogwild::detail
