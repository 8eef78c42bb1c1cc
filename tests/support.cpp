#define DOCTEST_CONFIG_IMPLEMENT
#include "support.hpp"

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/rng.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace hogwild::test {

namespace fs = std::filesystem;

namespace {
int g_skipped = 0;  // skip() calls in this process
}  // namespace

void skip(const std::string& why) {
  MESSAGE("SKIPPED: " << why);
  ++g_skipped;
}

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
  skip("shared datasets not found at " + p.string() + " (set HOGWILD_SHARED_DATA)");
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

RunResult run_train(const std::vector<std::string>& args, const std::vector<std::string>& more,
                    double timeout_seconds) {
  std::vector<std::string> argv{hogwild_train_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), more.begin(), more.end());
  return run(argv, timeout_seconds);
}

Dataset class_blobs(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> labels(rows), values(rows * cols);
  for (std::size_t i = 0; i < rows; ++i) {
    labels[i] = static_cast<float>(i % 3);
    for (std::size_t j = 0; j < cols; ++j)
      values[i * cols + j] = static_cast<float>(rng.normal()) + (j % 3 == i % 3 ? 0.7f : 0.f);
  }
  return Dataset::dense(labels, values, cols, "blobs");
}

Dataset gaussian_rows(const std::vector<float>& labels, std::size_t cols, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> val(labels.size() * cols);
  for (auto& v : val) v = static_cast<float>(rng.normal());
  return Dataset::dense(labels, val, cols, "dense");
}

Dataset slice(const Dataset& d, std::size_t begin, std::size_t end, const std::string& name) {
  auto labels = d.labels().subspan(begin, end - begin);
  if (d.layout() == Layout::dense)
    return Dataset::dense(labels, d.values().subspan(begin * d.cols(), (end - begin) * d.cols()),
                          d.cols(), name);
  if (d.layout() == Layout::dense_u8)
    return Dataset::dense_u8(labels, d.pixels().subspan(begin * d.cols(), (end - begin) * d.cols()),
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

bool skip_cli_under_tsan() {
  if (!kThreadSanitizer) return false;
  skip("under TSan: runs hogwild_train, whose TBB parsing threads TSan cannot see");
  return true;
}

bool skip_threads_under_tsan() {
  if (!kThreadSanitizer) return false;
  skip("under TSan: TBB threads in this process, whose uninstrumented library TSan cannot see");
  return true;
}

bool skip_statistics_under_sanitizers() {
  if (!kSanitized) return false;
  skip("under a sanitizer: a statistical case, whose code paths the cases beside it run");
  return true;
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

std::size_t entries_in(const fs::path& dir) {
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TrainConfig sgd_config(Mode mode, unsigned workers) {
  TrainConfig c;
  c.mode = mode;
  c.workers = workers;
  c.epochs = 8;
  c.step_size.lr0 = 0.5f;
  c.step_size.decay = 0.8f;
  c.seed = 7;
  return c;
}

std::pair<std::string, std::string> problem_files(const TempDir& dir, std::size_t rows,
                                                  std::size_t features) {
  auto [tr, te] = generated_problem(rows, rows / 4, features, 20, 0.05, 7);
  write_libsvm(tr, dir.file("train.svm"));
  write_libsvm(te, dir.file("test.svm"));
  return {dir.file("train.svm"), dir.file("test.svm")};
}

std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  pid_t c;
  while (f >> c) out.push_back(c);
  return out;
}

Background start_train(const std::vector<std::string>& args, const TempDir& dir,
                       const std::string& out_name, bool own_group) {
  std::vector<std::string> argv{hogwild_train_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return start_program(argv, dir, out_name, own_group);
}

Background start_program(std::vector<std::string> argv, const TempDir& dir,
                         const std::string& out_name, bool own_group) {
  Background b{0, dir.file(out_name)};
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  b.pid = fork();
  if (b.pid == 0) {
    if (own_group) setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int fd = open(b.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(a[0], a.data());
    _exit(127);
  }
  return b;
}

std::vector<pid_t> wait_for_workers(pid_t parent, std::size_t n) {
  for (int i = 0; i < 400; ++i) {
    auto c = children_of(parent);
    if (c.size() >= n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return children_of(parent);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return {};
}

bool wait_for_text(const std::string& path, const std::string& text, double seconds) {
  for (int i = 0; i < seconds * 500; ++i) {  // every 2 ms: a kill that waits for it lands soon after
    if (read_text(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

int wait_exit(pid_t pid, double seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1000;
}

bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(stat, s);
  return s.empty() || s.find(") Z ") != std::string::npos;
}

bool all_gone_within(const std::vector<pid_t>& pids, double seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    bool all = true;
    for (pid_t p : pids) all = all && gone(p);
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::atomic<int>& shared_flag() {
  static auto* flag = static_cast<std::atomic<int>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  return *flag;
}


int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

bool accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

RedisServer::RedisServer(const TempDir& dir) : port_(free_port()) {
  std::fflush(nullptr);
  pid_ = fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    std::freopen("/dev/null", "w", stdout);
    const std::string port = std::to_string(port_);
    execl(kRedisServer, kRedisServer, "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no", "--dir", dir.path().c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 500 && !accepts(port_); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(accepts(port_));
}

long RedisServer::keys() const {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port_));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  const std::string ask = "*1\r\n$6\r\nDBSIZE\r\n";
  REQUIRE(write(fd, ask.data(), ask.size()) == static_cast<ssize_t>(ask.size()));
  std::string reply;
  char buffer[64];
  while (reply.find("\r\n") == std::string::npos) {  // ":N\r\n"
    const ssize_t got = read(fd, buffer, sizeof buffer);
    REQUIRE(got > 0);
    reply.append(buffer, static_cast<std::size_t>(got));
  }
  close(fd);
  REQUIRE(reply.front() == ':');
  return std::stol(reply.substr(1));
}

RedisServer::~RedisServer() {
  kill(pid_, SIGTERM);
  if (wait_exit(pid_, 10) == -1000) MESSAGE("redis-server had to be killed");
}

pid_t fork_child(const std::function<int()>& fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = fn();
    } catch (const hogwild::Error& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      rc = 100 + e.exit_code();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    std::fflush(stderr);
    _exit(rc);
  }
  return pid;
}

namespace {
std::map<std::string, std::function<int(const std::vector<std::string>&)>>& child_entries() {
  static std::map<std::string, std::function<int(const std::vector<std::string>&)>> entries;
  return entries;
}
}  // namespace

ChildEntry::ChildEntry(const char* name, std::function<int(const std::vector<std::string>&)> fn) {
  child_entries().emplace(name, std::move(fn));
}

pid_t spawn_child(const std::string& name, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/proc/self/exe", "--child", name};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", c.data());
    std::fprintf(stderr, "exec of /proc/self/exe failed: %s\n", std::strerror(errno));
    _exit(127);
  }
  return pid;
}

// Runs the child entry argv[2] (spawn_child), or returns -1 when this is no child.
int run_child_entry(int argc, char** argv) {
  if (argc < 3 || std::string(argv[1]) != "--child") return -1;
  const auto it = child_entries().find(argv[2]);
  if (it == child_entries().end()) {
    std::fprintf(stderr, "no child entry named %s\n", argv[2]);
    return 1;
  }
  try {
    return it->second(std::vector<std::string>(argv + 3, argv + argc));
  } catch (const hogwild::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[2], e.what());
    return 100 + e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[2], e.what());
    return 1;
  }
}

SharedBytes::SharedBytes(std::size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap of shared bytes failed");
  bytes = {static_cast<std::byte*>(p), n};
}

SharedBytes::~SharedBytes() { munmap(bytes.data(), bytes.size()); }

SocketPair::SocketPair() {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0)
    throw std::runtime_error("socketpair failed");
}

SocketPair::~SocketPair() {
  for (int f : fd)
    if (f >= 0) close(f);
}

}  // namespace hogwild::test

// doctest's main, plus meson's skip status: 77 when a case was skipped and none
// failed (doctest itself would report the run as a pass).
int main(int argc, char** argv) {
  if (const int child = hogwild::test::run_child_entry(argc, argv); child >= 0) return child;
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit() || rc != 0) return rc;
  if (hogwild::test::g_skipped > 0) {
    std::printf("%d test case(s) skipped (see SKIPPED above): exit 77, reported as skipped\n",
                hogwild::test::g_skipped);
    return 77;
  }
  return 0;
}
