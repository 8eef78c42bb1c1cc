// Sinks for what a run produces: JSON-lines metrics (one object per evaluation),
// the human progress line, and the one-object JSON summary. Field names are a
// stable interface that scripts depend on (docs/CLI.md).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "hogwild/trainer.hpp"

namespace hogwild {

// Appends one JSON object per line: time, epoch, samples, train_loss, test_loss,
// test_accuracy (or test_rmse), samples_per_second. Each line is one write(2), so a
// crash loses at most the line being written; a write error throws IoError
// (ResourceError for a full disk, the file cut back to its last whole line). The
// file is opened at the first line, not before: a run that fails first (an arena
// that does not fit, a refused resume) leaves the previous run's file as it was.
// append (a resumed run): the lines of the run it continues stay and its own
// follow; otherwise the file is emptied at the first line. "-" is standard output.
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& path, bool append = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const Progress& p);
  // The last write failed because its reader had gone (EPIPE: `--metrics - | head`).
  bool reader_gone() const noexcept { return reader_gone_; }

 private:
  std::string path_;
  bool append_ = false;
  bool reader_gone_ = false;
  int fd_ = -1;
};

// One evaluation as a JSON object in one line (no newline): the record each line of
// --metrics holds, and what the Python module's Result.metrics lists.
std::string progress_json(const Progress& p);

// "epoch   3/10  1.23M samples/s  train loss 0.2345  test loss 0.2456  accuracy 0.9712  1.2s"
std::string format_progress(const Progress& p, unsigned epochs);

// The live line of a terminal, cut to `width` columns:
// "epoch 3/10  41.2% of epoch  1.23M examples/s  ETA epoch 4s, run 52s"
// (ETAs from the recent rate; "?" while there is none).
std::string format_live_progress(const LiveProgress& p, std::size_t width);
// A duration for a person: "4s", "3m05s", "1h02m"; "?" when not finite or negative.
std::string format_duration(double seconds);

// The summary object (see docs/CLI.md for the fields).
std::string summary_json(const TrainConfig& config, const TrainResult& result,
                         const std::string& train_path, const std::string& test_path);
// The run's result in one line, as hogwild_train ends: "done: N samples in 1.23s
// (... samples/s), test accuracy ..., peak memory ... (estimated ...)" and what the
// mode and the options add.
std::string result_line(const TrainConfig& config, const TrainResult& result);
// "12.3 MiB".
std::string format_mib(std::uint64_t bytes);
// Writes `text` to `path` through the one output writer (src/data/file_io.hpp's
// OutputFile): a file atomically (temporary file, fsync, rename, fsync of the
// folder), through its links, which stay; `-`, /dev/stdout and other descriptors
// streamed; devices and FIFOs in place. A full disk (ENOSPC, EFBIG, EDQUOT) is a
// ResourceError; either way the temporary is removed and the previous file is left
// as it was.
void write_file_atomically(const std::string& path, const std::string& text);

namespace detail {
// Async-signal-safe: unlinks the temporary write_file_atomically is writing, if any.
void remove_pending_temporary() noexcept;
}  // namespace detail

}  // namespace hogwild
