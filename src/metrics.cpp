#include "hogwild/metrics.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/file_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/options.hpp"
#include "modes/mode_def.hpp"

namespace hogwild {

namespace {

// The machine a run ran on, for its summary and the figures made from it: the CPU's
// model, the vector units the kernels choose between (an Intel with AMX and an AMD
// without take different ones), and the cores. bench/suite.py's cpu_name() writes
// the same.
std::string machine_name() {
  std::string model = "unknown CPU";
  std::set<std::string> flags;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto value = [&] {
      const auto b = line.find_first_not_of(" \t", colon + 1);
      const auto e = line.find_last_not_of(" \t\r");
      return b == std::string::npos || e < b ? std::string() : line.substr(b, e - b + 1);
    };
    if (line.rfind("model name", 0) == 0 && model == "unknown CPU") {
      model = value();
    } else if (line.rfind("flags", 0) == 0 && flags.empty()) {
      std::istringstream words(value());
      for (std::string w; words >> w;) flags.insert(w);
    }
  }
  std::string units;
  for (const auto& [unit, flag] : {std::pair{"AVX-512", "avx512f"}, {"AVX-512 BF16", "avx512_bf16"},
                                   {"AMX-BF16", "amx_bf16"}})
    if (flags.count(flag)) units += (units.empty() ? "" : ", ") + std::string(unit);
  // The cores this run may use (taskset, a cgroup's cpuset), as the kernels' threads see them.
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = ::sched_getaffinity(0, sizeof set, &set) == 0
                        ? CPU_COUNT(&set)
                        : static_cast<int>(std::thread::hardware_concurrency());
  return fmt::format("{} ({}), {} {}", model, units.empty() ? "no AVX-512" : units, cores,
                     cores == 1 ? "core" : "cores");
}


// JSON has no NaN: metrics that do not apply are null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json quantiles_json(const Quantiles& q) {
  return {{"samples", q.samples}, {"mean", q.mean}, {"p50", q.p50},
          {"p90", q.p90},         {"p99", q.p99},   {"max", q.max}};
}

// The summary's "staleness": null where nothing was measured (a mode whose steps
// do not write the shared weights themselves).
nlohmann::json staleness_json(const Staleness& s) {
  if (s.every == 0) return nullptr;
  nlohmann::json workers = nlohmann::json::array(), lengths = nlohmann::json::array();
  for (std::size_t w = 0; w < s.worker_lag.size(); ++w)
    workers.push_back({{"lag", quantiles_json(s.worker_lag[w])},
                       {"overlap", quantiles_json(s.worker_overlap[w])}});
  for (const auto& b : s.by_length)
    lengths.push_back({{"min_nnz", b.min_nnz},
                       {"max_nnz", b.max_nnz ? nlohmann::json(b.max_nnz) : nlohmann::json()},
                       {"samples", b.samples},
                       {"mean_lag", b.mean_lag}});
  return {{"every", s.every},
          {"unit", "examples of the other workers"},
          {"lag", quantiles_json(s.lag)},
          {"overlap", quantiles_json(s.overlap)},
          {"workers", workers},
          {"lag_by_nnz", lengths},
          {"lag_histogram", s.lag_histogram}};
}

std::string human_rate(double r) {
  if (r >= 1e6) return fmt::format("{:.2f}M", r / 1e6);
  if (r >= 1e3) return fmt::format("{:.1f}k", r / 1e3);
  return fmt::format("{:.0f}", r);
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path, bool append)
    : path_(path), append_(append) {}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

std::string progress_json(const Progress& p) {
  nlohmann::json j{
      {"time", p.time},
      {"epoch", p.epoch},
      {"samples", p.samples},
      {"samples_min", p.samples_min},
      {"samples_max", p.samples_max},
      {"worker_samples_min", p.worker_samples_min},
      {"worker_samples_max", p.worker_samples_max},
      {"eval_seconds", p.eval_seconds},
      {"reported_time", p.reported_time},
      {"train_loss", num(p.train_loss)},
      {"test_loss", num(p.test.loss)},
      {"test_accuracy", num(p.test.accuracy)},
      {"samples_per_second", p.samples_per_second},
      {"recent_samples_per_second", p.recent_samples_per_second},
      {"end_of_epoch", p.end_of_epoch},
      {"restarts", p.restarts},
  };
  if (std::isfinite(p.test.rmse)) j["test_rmse"] = p.test.rmse;
  if (p.restart) j["restart"] = true;
  if (p.late) j["late"] = true;
  if (p.simulated_time >= 0) j["simulated_time"] = p.simulated_time;
  if (p.lag.samples > 0) {
    j["lag"] = quantiles_json(p.lag);
    j["overlap"] = quantiles_json(p.overlap);
  }
  return detail::json_text(j);
}

void MetricsWriter::write(const Progress& p) {
  const std::string line = progress_json(p) + "\n";
  if (fd_ < 0) {
    // A descriptor (-, /dev/stdout, a link to one) is written where it stands: opening
    // /dev/stdout "w" truncated the log that standard output was redirected to.
    const detail::OutputTarget t = detail::output_target(path_);
    if (t.kind == detail::OutputTarget::Kind::stream) {
      std::fflush(nullptr);
      fd_ = ::fcntl(t.fd, F_DUPFD_CLOEXEC, 0);
    } else {
      fd_ = ::open(t.path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append_ ? O_APPEND : O_TRUNC), 0666);
    }
    if (fd_ < 0)
      throw IoError(fmt::format("cannot write metrics to {}: {}", path_, std::strerror(errno)));
  }
  // A line is one write: where the disk fills part-way through it, a file is cut back
  // to its last whole line (a reader, or a resumed run appending, finds whole lines).
  struct stat st{};
  const bool file = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  if (const int err = detail::write_all(fd_, line.data(), line.size())) {
    if (file) (void)!::ftruncate(fd_, st.st_size);
    reader_gone_ = err == EPIPE;
    const std::string msg = fmt::format("cannot write metrics to {}: {}", path_, std::strerror(err));
    if (is_out_of_space(err)) throw ResourceError(msg + "; the lines written before are intact");
    throw IoError(msg);
  }
}

std::string format_progress(const Progress& p, unsigned epochs) {
  std::string s = p.end_of_epoch
                      ? fmt::format("epoch {:>3}/{:<3}", static_cast<unsigned>(p.epoch), epochs)
                      : fmt::format("epoch {:>7.2f}", p.epoch);
  // (A late line's rate is over weights later than its epoch: not the epoch's.)
  // (No epoch has ended before the first: no training loss yet, "-", not a NaN that
  // reads as a divergence.)
  s += fmt::format("  {:>7} samples/s  train loss {}",
                   p.late ? std::string("-") : human_rate(p.recent_samples_per_second),
                   std::isfinite(p.train_loss) ? fmt::format("{:.4f}", p.train_loss) : std::string("-"));
  if (std::isfinite(p.test.loss)) s += fmt::format("  test loss {:.4f}", p.test.loss);
  if (std::isfinite(p.test.accuracy)) s += fmt::format("  accuracy {:.4f}", p.test.accuracy);
  if (std::isfinite(p.test.rmse)) s += fmt::format("  rmse {:.4f}", p.test.rmse);
  s += fmt::format("  time {:.1f}s", p.time);
  if (p.late)
    s += fmt::format("  (tested on the weights after {} samples: no snapshot of this epoch was kept)",
                     p.samples);
  return s;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds >= 1e8) return ">3y";
  const auto s = static_cast<std::uint64_t>(std::ceil(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

std::string format_live_progress(const LiveProgress& p, std::size_t width) {
  const auto left = [&](std::uint64_t total, std::uint64_t done) {
    return p.rate > 0 ? format_duration(static_cast<double>(total - std::min(total, done)) / p.rate)
                      : std::string("?");
  };
  const double percent = p.epoch_rows ? 100.0 * static_cast<double>(p.epoch_samples) /
                                            static_cast<double>(p.epoch_rows)
                                      : 0;
  std::string s = fmt::format("epoch {}/{}  {:.1f}% of epoch  {} examples/s  ETA epoch {}, run {}",
                              p.epochs_done + 1, p.epochs, std::min(percent, 100.0),
                              human_rate(p.rate), left(p.epoch_rows, p.epoch_samples),
                              left(p.total, p.samples));
  if (s.size() > width) s.resize(width);
  return s;
}

std::string summary_json(const TrainConfig& c, const TrainResult& r, const std::string& train_path,
                         const std::string& test_path) {
  nlohmann::json j{
      {"model", c.model},
      {"mode", std::string(to_string(c.mode))},
      {"optimizer", std::string(to_string(c.optimizer))},
      {"workers", workers_used(c.mode, c.workers)},
      {"nodes", c.nodes},
      {"node_rank", c.node_rank},
      {"partition", to_string(c.partition)},
      {"epochs", c.epochs},
      {"batch", c.batch},
      {"merge_every", c.merge_every == TrainConfig::kMergeAuto ? nlohmann::json("auto")
                                                                : nlohmann::json(c.merge_every)},
      {"lr", c.step_size.lr0},
      {"lr_decay", c.step_size.decay},
      {"lr_inverse", c.step_size.inverse_scale},
      {"l2", c.model_options.l2},
      {"bias", c.model_options.bias},
      {"matmul_precision", to_string(c.model_options.matmul)},
      {"factors", to_string(c.model_options.factors)},
      {"device_warps", r.device_warps},
      {"seed", c.seed},
      {"train", train_path},
      {"test", test_path.empty() ? nlohmann::json() : nlohmann::json(test_path)},
      {"train_seconds", r.train_seconds},
      {"run_seconds", r.run_seconds},
      {"samples", r.samples},
      {"samples_per_second", r.samples_per_second},
      {"nnz_per_second", r.nnz_per_second},
      {"train_loss", num(r.train_loss)},
      {"test_loss", num(r.test.loss)},
      {"test_accuracy", num(r.test.accuracy)},
      {"peak_rss_bytes", r.peak_rss_bytes},
      {"memory_estimate_bytes", r.memory_estimate.total},
      {"memory_estimate_worst_bytes", r.memory_estimate.worst},
      {"merges", r.merges},
      {"node_syncs", r.node_syncs},
      {"node_sync_seconds", r.node_sync_seconds},
      {"node_sync_lag_examples", r.node_sync_lag_examples},
      {"merge_every_final", r.merge_every},
      {"flushes", r.flushes},
      {"flush_every_final", r.flush_every},
      {"lock_recoveries", r.lock_recoveries},
      {"huge_pages", r.huge_pages},
      {"restarts", r.restarts},
      {"resumed_epochs", r.resumed_epochs},
      {"interrupted", r.signal == SIGINT    ? nlohmann::json("SIGINT")
                      : r.signal == SIGTERM ? nlohmann::json("SIGTERM")
                      : r.signal == SIGHUP  ? nlohmann::json("SIGHUP")
                      : r.signal == SIGPIPE ? nlohmann::json("SIGPIPE")  // stdout closed
                      : r.signal == SIGXFSZ ? nlohmann::json("output full")  // request_stop's
                                            : nlohmann::json()},
      {"checkpoint", c.checkpoint.empty() ? nlohmann::json() : nlohmann::json(c.checkpoint)},
      {"machine", machine_name()},
  };
  if (std::isfinite(r.test.rmse)) j["test_rmse"] = r.test.rmse;
  if (!r.weights_sha256.empty()) j["weights_sha256"] = r.weights_sha256;
  if (!r.balance.empty())
    j["balance"] = {{"used", r.balance}, {"why", r.balance_why}, {"stolen_rows", r.stolen_rows}};
  j["memory_estimate_address_space_bytes"] = {{"parent", r.memory_estimate.parent_address_space},
                                               {"worker", r.memory_estimate.worker_address_space}};
  auto& parts = j["memory_estimate_parts"] = nlohmann::json::array();
  for (const auto& p : r.memory_estimate.parts)
    parts.push_back({{"what", p.what}, {"bytes", p.bytes}, {"possible", p.possible}});
  if (c.nodes > 1) {
    j["join_seconds"] = r.join_seconds;
    j["iface"] = r.iface;
  }
  // (--mode simulated measures every update exactly, without --telemetry.)
  if (c.telemetry || r.staleness.every > 0) j["staleness"] = staleness_json(r.staleness);
  // Every option as the run had it (hogwild/options.hpp), keyed as in Python: what
  // a later run needs to repeat this one.
  auto& options = j["options"] = nlohmann::json::object();
  for (const auto& o : train_options()) {
    if (!o.command_line) continue;
    std::string key = o.name;
    std::replace(key.begin(), key.end(), '-', '_');
    options[key] = o.get(c);
  }
  for (const auto& o : detail::mode_def(c.mode).options())  // the mode's own, as run
    j["mode_options"][o.name] = detail::mode_option(c, o.name);
  if (r.conflicts.measured) {
    nlohmann::json coords = nlohmann::json::array();
    for (const auto& x : r.conflicts.coordinates)
      coords.push_back({{"what", x.what}, {"why", x.why}, {"writes", x.writes},
                        {"conflicts", x.conflicts}, {"intended", x.intended},
                        {"applied", x.applied}, {"lost_mass", x.lost_mass}});
    j["conflicts"] = {{"writes", r.conflicts.writes}, {"conflicts", r.conflicts.conflicts},
                      {"conflict_rate", r.conflicts.conflict_rate},
                      {"lost_mass_mean", r.conflicts.lost_mass_mean},
                      {"lost_mass_max", r.conflicts.lost_mass_max}, {"coordinates", coords}};
  }
  // (After the fields above: a mode may say what its own figures mean.)
  detail::mode_def(c.mode).summarize(c, r, j);
  return detail::json_text(j, 2) + "\n";
}

std::string format_mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string result_line(const TrainConfig& c, const TrainResult& r) {
  std::string line = fmt::format("{}: {} samples in {:.2f}s ({:.0f} samples/s)",
                                 r.signal == SIGINT    ? "interrupted (SIGINT)"
                                 : r.signal == SIGTERM ? "terminated (SIGTERM)"
                                 : r.signal == SIGHUP  ? "stopped (SIGHUP)"
                                 : r.signal == SIGPIPE ? "stopped (standard output closed)"
                                 : r.signal == SIGXFSZ ? "stopped (an output's disk is full)"
                                                       : "done",
                                 r.samples, r.train_seconds, r.samples_per_second);
  if (std::isfinite(r.test.accuracy)) line += fmt::format(", test accuracy {:.4f}", r.test.accuracy);
  if (std::isfinite(r.test.loss)) line += fmt::format(", test loss {:.4f}", r.test.loss);
  if (std::isfinite(r.test.rmse)) line += fmt::format(", test rmse {:.4f}", r.test.rmse);
  line += fmt::format(", peak memory {} (estimated {})", format_mib(r.peak_rss_bytes),
                      format_mib(r.memory_estimate.total));
  line += detail::mode_def(c.mode).result_text(c, r);
  if (c.merge_every == TrainConfig::kMergeAuto && r.merges)
    line += fmt::format(", {} merges, every {:.0f} examples at the end", r.merges, r.merge_every);
  if (r.flushes)
    line += fmt::format(", {} hot flushes, every {:.0f} examples at the end", r.flushes, r.flush_every);
  if (r.restarts) line += fmt::format(", {} worker restart(s)", r.restarts);
  if (!c.checkpoint.empty()) line += ", checkpoint " + c.checkpoint;
  return line;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  detail::OutputFile out(path, false);
  out.write(text);
  out.commit();
}

}  // namespace hogwild
