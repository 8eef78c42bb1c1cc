// A worker described by data: (rank, configuration, arena handle, rows' handles) is
// all the fork server needs to start, or restart, a worker of a run. The parent
// writes the description once per run (WorkerDescription); the fork server's worker
// turns it back into the run's state (worker_entry) and trains its share.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hogwild/trainer.hpp"

namespace hogwild::detail {

struct Run;

// The configuration as CBOR (JSON's binary form, which keeps a path's bytes as they
// are, UTF-8 or not) and back: every field of TrainConfig.
std::string config_to_cbor(const TrainConfig& c);
TrainConfig config_from_cbor(std::string_view bytes);

// The parent's side: the configuration and the names of the rows (`description`, in
// CBOR),
// and the descriptors beside it (`fds`: the arena's handle, the training rows and,
// if any, the test rows, each in a memory file). Owns the memory files.
class WorkerDescription {
 public:
  explicit WorkerDescription(const Run& run);
  ~WorkerDescription();
  WorkerDescription(const WorkerDescription&) = delete;
  WorkerDescription& operator=(const WorkerDescription&) = delete;

  const std::string& description() const noexcept { return description_; }
  const std::vector<int>& fds() const noexcept { return fds_; }

 private:
  std::string description_;
  std::vector<int> fds_;
  std::vector<int> owned_;  // the memory files (the arena's handle is the arena's)
};

// The fork server's side: builds the run from a WorkerDescription's bytes and
// descriptors and runs worker `rank`; returns its exit status.
int worker_entry(unsigned rank, std::string_view description, std::span<const int> fds);

}  // namespace hogwild::detail
