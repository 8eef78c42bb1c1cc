#include "hogwild/metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hogwild/error.hpp"

namespace hogwild {

namespace {

// JSON has no NaN: metrics that do not apply are null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::string human_rate(double r) {
  if (r >= 1e6) return fmt::format("{:.2f}M", r / 1e6);
  if (r >= 1e3) return fmt::format("{:.1f}k", r / 1e3);
  return fmt::format("{:.0f}", r);
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw IoError(fmt::format("cannot write metrics to {}: {}", path, std::strerror(errno)));
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

void MetricsWriter::write(const Progress& p) {
  nlohmann::json j{
      {"time", p.time},
      {"epoch", p.epoch},
      {"samples", p.samples},
      {"train_loss", num(p.train_loss)},
      {"test_loss", num(p.test.loss)},
      {"test_accuracy", num(p.test.accuracy)},
      {"samples_per_second", p.samples_per_second},
      {"end_of_epoch", p.end_of_epoch},
  };
  if (std::isfinite(p.test.rmse)) j["test_rmse"] = p.test.rmse;
  const std::string line = j.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    throw IoError(fmt::format("cannot write metrics to {}: {}", path_, std::strerror(errno)));
}

std::string format_progress(const Progress& p, unsigned epochs) {
  std::string s = p.end_of_epoch
                      ? fmt::format("epoch {:>3}/{:<3}", static_cast<unsigned>(p.epoch), epochs)
                      : fmt::format("epoch {:>7.2f}", p.epoch);
  s += fmt::format("  {:>7} samples/s  train loss {:.4f}", human_rate(p.samples_per_second),
                   p.train_loss);
  if (std::isfinite(p.test.loss)) s += fmt::format("  test loss {:.4f}", p.test.loss);
  if (std::isfinite(p.test.accuracy)) s += fmt::format("  accuracy {:.4f}", p.test.accuracy);
  if (std::isfinite(p.test.rmse)) s += fmt::format("  rmse {:.4f}", p.test.rmse);
  s += fmt::format("  {:.1f}s", p.time);
  return s;
}

std::string summary_json(const TrainConfig& c, const TrainResult& r, const std::string& train_path,
                         const std::string& test_path) {
  nlohmann::json j{
      {"model", c.model},
      {"mode", std::string(to_string(c.mode))},
      {"optimizer", std::string(to_string(c.optimizer))},
      {"workers", c.mode == Mode::serial ? 1u : c.workers},
      {"epochs", c.epochs},
      {"batch", c.batch},
      {"lr", c.step_size.lr0},
      {"lr_decay", c.step_size.decay},
      {"lr_inverse", c.step_size.inverse_scale},
      {"l2", c.model_options.l2},
      {"bias", c.model_options.bias},
      {"seed", c.seed},
      {"train", train_path},
      {"test", test_path.empty() ? nlohmann::json() : nlohmann::json(test_path)},
      {"train_seconds", r.train_seconds},
      {"samples", r.samples},
      {"samples_per_second", r.samples_per_second},
      {"nnz_per_second", r.nnz_per_second},
      {"train_loss", num(r.train_loss)},
      {"test_loss", num(r.test.loss)},
      {"test_accuracy", num(r.test.accuracy)},
      {"peak_rss_bytes", r.peak_rss_bytes},
      {"lock_recoveries", r.lock_recoveries},
      {"huge_pages", r.huge_pages},
  };
  if (std::isfinite(r.test.rmse)) j["test_rmse"] = r.test.rmse;
  return j.dump(2) + "\n";
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw IoError(fmt::format("cannot write {}: {}", path, std::strerror(err)));
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw IoError(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
}

}  // namespace hogwild
