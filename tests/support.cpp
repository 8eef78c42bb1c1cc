#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "support.hpp"

#include "hogwild/data_io.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace hogwild::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = fs::temp_directory_path() / ("hogwild-test-" + std::to_string(rd()));
    if (fs::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

std::optional<fs::path> shared_data() {
  const char* env = std::getenv("HOGWILD_SHARED_DATA");
  fs::path p = env ? fs::path(env) : fs::path("../shared/data");
  if (fs::exists(p / "spamassassin" / "spam.train.svm.gz")) return p;
  MESSAGE("SKIPPED: shared datasets not found at " << p.string()
                                                   << " (set HOGWILD_SHARED_DATA)");
  return std::nullopt;
}

RunResult run(const std::vector<std::string>& argv, double timeout_seconds) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipefd[1]);
  RunResult r;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000));
  char buf[4096];
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(std::min<long>(left, 1000)));
    if (rc > 0) {
      ssize_t n = read(pipefd[0], buf, sizeof buf);
      if (n <= 0) break;
      r.out.append(buf, static_cast<std::size_t>(n));
    }
  }
  close(pipefd[0]);
  if (timed_out) {
    kill(pid, SIGKILL);
    r.out += "\n[test harness: killed after timeout]\n";
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  if (timed_out) r.exit_code = -1000;
  return r;
}

static std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}
std::string hogwild_train_path() { return env_or("HOGWILD_TRAIN", "src/hogwild_train"); }
std::string hogwild_data_path() { return env_or("HOGWILD_DATA", "src/hogwild_data"); }

Dataset slice(const Dataset& d, std::size_t begin, std::size_t end, const std::string& name) {
  auto labels = d.labels().subspan(begin, end - begin);
  if (d.layout() == Layout::dense)
    return Dataset::dense(labels, d.values().subspan(begin * d.cols(), (end - begin) * d.cols()),
                          d.cols(), name);
  auto off = d.offsets();
  std::vector<std::uint64_t> rebased(off.begin() + static_cast<std::ptrdiff_t>(begin),
                                     off.begin() + static_cast<std::ptrdiff_t>(end) + 1);
  for (auto& o : rebased) o -= off[begin];
  return Dataset::sparse(labels, rebased, d.indices().subspan(off[begin], off[end] - off[begin]),
                         d.values().subspan(off[begin], off[end] - off[begin]), d.cols(), name);
}

std::pair<Dataset, Dataset> generated_problem(std::size_t n_train, std::size_t n_test,
                                              std::size_t features, std::size_t nnz,
                                              double noise, std::uint64_t seed) {
  GenerateOptions g;
  g.rows = n_train + n_test;
  g.features = features;
  g.nnz_per_row = nnz;
  g.noise = noise;
  g.seed = seed;
  Dataset all = generate_sparse(g);
  return {slice(all, 0, n_train, "generated.train"),
          slice(all, n_train, n_train + n_test, "generated.test")};
}

std::vector<std::string> our_shm_entries() {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/dev/shm", ec)) {
    auto name = e.path().filename().string();
    if (name.rfind("hogwild-", 0) == 0) out.push_back(name);
  }
  return out;
}

}  // namespace hogwild::test
