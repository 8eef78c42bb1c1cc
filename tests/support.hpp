// Helpers shared by the tests: temporary folders, the shared real datasets (skipped
// with a message where ../shared/data is absent), running the CLIs, /dev/shm checks.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild::test {

// A fresh temporary directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void write_text(const std::string& path, const std::string& text);
void write_gzip(const std::string& path, const std::string& bytes);
std::string read_text(const std::string& path);

// Folder of the shared real datasets, or nullopt (the caller skips) when absent.
std::optional<std::filesystem::path> shared_data();

struct RunResult {
  int exit_code = -1;  // -signal when killed
  std::string out;     // stdout and stderr together
};
// Runs argv (argv[0] is a path) with a hang guard; stdout+stderr captured.
RunResult run(const std::vector<std::string>& argv, double timeout_seconds = 240);
// Paths of the built CLIs (from the environment meson sets).
std::string hogwild_train_path();
std::string hogwild_data_path();

// Rows [begin, end) of a dataset as a dataset of its own.
Dataset slice(const Dataset& d, std::size_t begin, std::size_t end, const std::string& name);
// A generated sparse problem split into train (first n_train rows) and test.
std::pair<Dataset, Dataset> generated_problem(std::size_t n_train, std::size_t n_test,
                                              std::size_t features, std::size_t nnz,
                                              double noise, std::uint64_t seed);

// Names in /dev/shm created by this tool ("hogwild-" prefix).
std::vector<std::string> our_shm_entries();

}  // namespace hogwild::test
