// Checkpoints: everything a run needs to continue where it stopped — the tensors of
// the arena (parameters and optimiser state), each worker's progress, the restart
// count, and what the run was: its configuration and a fingerprint of its training
// data, so that a resume with other data or options is refused with the difference.
//
// File format (version 2, little-endian): magic "HWCKPT01", u32 version, u32 zero,
// u64 payload size, the payload, then a CRC-32 (zlib) of every byte before it. The
// RNG state is not stored: each worker's shuffle of epoch e is drawn from a stream
// derived from (seed, rank, e), so a position in the epoch is enough to recompute it.
// Files are written atomically (temporary file, fsync, rename, fsync of the folder):
// a crash at any moment leaves the previous checkpoint or the new one, never a mix.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild {

struct TrainConfig;

// What identifies a training set without storing it: its shape and a CRC of every
// label, offset, index and value (a training file whose middle rows changed, past
// the first and last 64 KiB that were hashed before version 2, resumed silently).
struct DataFingerprint {
  std::uint64_t rows = 0, cols = 0, nnz = 0, hash = 0;
  static DataFingerprint of(const Dataset& d);
  bool operator==(const DataFingerprint&) const = default;
  std::string describe() const;  // "2000 rows, 100 columns, 10000 non-zeros, hash 1a2b3c4d"
};

// A worker's place in the run (see WorkerProgress in src/trainer/progress.hpp).
struct WorkerState {
  std::uint32_t epochs_done = 0;
  std::uint32_t epoch = 0;     // the epoch `position` refers to
  std::uint64_t position = 0;  // rows of that epoch's shuffled order already done
  std::uint64_t samples = 0;   // examples processed, all epochs
  double loss = 0;             // summed loss of those `position` rows
  std::vector<double> epoch_loss;  // summed loss of each epoch in [0, epochs_done)
  bool operator==(const WorkerState&) const = default;
};

struct NamedTensor {
  std::string name;  // the arena block: "param:<tensor>" or "state:<tensor>"
  std::vector<float> values;
  bool operator==(const NamedTensor&) const = default;
};

struct Checkpoint {
  std::vector<std::pair<std::string, std::string>> config;  // option -> value
  DataFingerprint data;
  std::uint32_t restarts = 0;
  double train_seconds = 0;
  std::vector<WorkerState> workers;
  std::vector<NamedTensor> tensors;
  // Epochs every worker has completed.
  std::uint32_t epochs_done() const;
  bool operator==(const Checkpoint&) const = default;
};

// 2: the fingerprint hashes every row; 3: each section (options, training state,
// each tensor) carries its length and checksum. Version 2 files are still read.
inline constexpr std::uint32_t kCheckpointVersion = 3;

std::string serialize_checkpoint(const Checkpoint& c);
// Validates magic, version, size and checksum before reading, and every count
// against the bytes left before allocating. Throws DataError naming `name`.
Checkpoint parse_checkpoint(std::string_view bytes, const std::string& name);
Checkpoint read_checkpoint(const std::string& path);
// Atomic; a full disk is a ResourceError and leaves the previous file intact.
void write_checkpoint(const Checkpoint& c, const std::string& path);

// A tensor read from where it lives while its checkpoint is written, a chunk at a
// time: read(begin, n, out) puts its values [begin, begin + n) in out (and may
// throw, which leaves the previous file intact). A run's weights go to the file
// straight from the arena: the end of a run needs no copy of them.
struct TensorSource {
  std::string name;  // as NamedTensor::name
  std::size_t size = 0;
  std::function<void(std::size_t begin, std::size_t n, float* out)> read;
};
// Values a TensorSource is read in at most (4 MiB): all that the writer holds.
inline constexpr std::size_t kCheckpointChunkFloats = std::size_t{1} << 20;
// `c` with `tensors` after c.tensors, written as write_checkpoint(c) would write a
// checkpoint holding them all.
void write_checkpoint(const Checkpoint& c, std::span<const TensorSource> tensors,
                      const std::string& path);

// The options that must match for a resume to make sense (all but --epochs and
// the output paths), as "--option" -> value.
std::vector<std::pair<std::string, std::string>> config_fingerprint(const TrainConfig& c);
// Throws ConfigError saying every difference between the checkpoint at `path` and
// this run: options, training data, or an --epochs already reached.
void check_resumable(const Checkpoint& c, const TrainConfig& config, const Dataset& train,
                     const std::string& path);

}  // namespace hogwild
