// The live progress of long epochs: the trainer's LiveCallback, the line's text,
// and hogwild_train drawing it on a pseudo-terminal only (never into a pipe or
// under --quiet), erased so that the per-epoch lines and the summary are as before.
#include <doctest/doctest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <optional>
#include <string>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

// Epochs of a few tenths of a second or more (progress is published every 64
// mini-batches, sampled every 100 ms and drawn at most 4 times a second): an MLP
// on sparse rows trains some 10k examples/s on the 2-core build machine, where
// the linear models' 3M would need millions of rows.
// Under a sanitizer the MLP trains 3-10x slower: fewer rows keep the runs as long.
constexpr std::size_t kRows = test::kSanitized ? 2000 : 8000;
constexpr std::size_t kHidden = 128;
constexpr unsigned short kColumns = 100;

struct PtyRun {
  int exit_code = -1;  // -signal when killed, -1000 on a hang
  std::string out;     // stdout and stderr, as the terminal received them
  double seconds = 0;
};

// Runs argv (argv[0] a path) with a pseudo-terminal of kColumns columns as its
// stdin, stdout and stderr. The terminal does not turn "\n" into "\r\n", so every
// "\r" in the output is the program's own.
PtyRun run_in_pty(const std::vector<std::string>& argv, double timeout_seconds = 120) {
  winsize ws{};
  ws.ws_row = 24;
  ws.ws_col = kColumns;
  int master = -1;
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    termios t{};
    tcgetattr(STDOUT_FILENO, &t);
    t.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    tcsetattr(STDOUT_FILENO, TCSANOW, &t);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  PtyRun r;
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000));
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<long>(left, 1000))) <= 0) continue;
    const ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO once the child and its workers have closed the terminal
    r.out.append(buf, static_cast<std::size_t>(n));
  }
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(master);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  if (timed_out) r.exit_code = -1000;
  return r;
}

// The live lines drawn ("\r<line>\033[K"), and the output without them and
// their erasures.
struct Split {
  std::vector<std::string> live;
  std::string rest;
};

Split split_live(const std::string& out) {
  Split s;
  const std::string erase = "\033[K";
  std::size_t i = 0;
  while (i < out.size()) {
    const std::size_t cr = out.find('\r', i);
    if (cr == std::string::npos) {
      s.rest += out.substr(i);
      break;
    }
    s.rest += out.substr(i, cr - i);
    const std::size_t end = out.find(erase, cr);
    if (end == std::string::npos || out.find('\n', cr) < end) {  // a stray "\r": kept
      s.rest += '\r';
      i = cr + 1;
      continue;
    }
    if (end > cr + 1) s.live.push_back(out.substr(cr + 1, end - cr - 1));
    i = end + erase.size();
  }
  return s;
}

// The lines a terminal shows once `out` is written to it: "\r" returns to the
// start of the line, "\033[K" erases from the cursor to the end of the line, "\n"
// starts a new line (as with the usual "\n" -> "\r\n"), anything else overwrites.
std::vector<std::string> screen(const std::string& out) {
  std::vector<std::string> lines{""};
  std::size_t col = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::string& line = lines.back();
    if (out[i] == '\n') {
      lines.emplace_back();
      col = 0;
    } else if (out[i] == '\r') {
      col = 0;
    } else if (out.compare(i, 3, "\033[K") == 0) {
      line.resize(col);
      i += 2;
    } else {
      if (col < line.size())
        line[col] = out[i];
      else
        line.push_back(out[i]);
      ++col;
    }
  }
  return lines;
}

bool has_line_starting(const std::vector<std::string>& lines, const std::string& prefix) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

// The fields of "epoch 3/10  41.2% of epoch  1.23M examples/s  ETA epoch 4s, run 52s".
// (Parsed with sscanf: GCC 12's std::regex does not build warning-free under ASan.)
struct LiveFields {
  unsigned epoch = 0, epochs = 0;
  double percent = -1;
  std::string epoch_eta, run_eta;
};

std::optional<LiveFields> parse_live(const std::string& line) {
  LiveFields f;
  char rate[32], epoch_eta[32], run_eta[32];
  int end = -1;
  if (std::sscanf(line.c_str(),
                  "epoch %u/%u  %lf%% of epoch  %31s examples/s  ETA epoch %31[^,], run %31s%n",
                  &f.epoch, &f.epochs, &f.percent, rate, epoch_eta, run_eta, &end) != 6 ||
      static_cast<std::size_t>(end) != line.size())
    return std::nullopt;
  f.epoch_eta = epoch_eta;
  f.run_eta = run_eta;
  return f;
}

// "4s", "3m05s", "1h02m".
bool is_duration(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i == s.size()) return false;
  const std::string rest = s.substr(i);
  const auto two_digits_then = [&](char unit) {
    return rest.size() == 4 && std::isdigit(static_cast<unsigned char>(rest[1])) &&
           std::isdigit(static_cast<unsigned char>(rest[2])) && rest[3] == unit;
  };
  return rest == "s" || (rest[0] == 'm' && two_digits_then('s')) ||
         (rest[0] == 'h' && two_digits_then('m'));
}

// Checks the live lines of a run of `epochs` epochs and what is left around them.
void check_terminal_output(const PtyRun& r, unsigned epochs) {
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const Split s = split_live(r.out);
  REQUIRE(!s.live.empty());
  bool eta = false;
  for (const auto& line : s.live) {
    INFO(line);
    CHECK(line.size() < kColumns);
    const auto f = parse_live(line);
    REQUIRE(f);
    CHECK(f->epoch >= 1);
    CHECK(f->epoch <= epochs);
    CHECK(f->epochs == epochs);
    CHECK(f->percent >= 0);
    CHECK(f->percent <= 100);
    if (f->epoch_eta != "?") {
      CHECK(is_duration(f->epoch_eta));
      CHECK(is_duration(f->run_eta));
      eta = true;
    }
  }
  CHECK(eta);
  // At most 4 draws a second, and a first draw of each epoch.
  CHECK(static_cast<double>(s.live.size()) <= 4.5 * r.seconds + epochs + 1);
  // Nothing else draws over a line, and the screen ends as the plain output.
  CHECK(s.rest.find('\r') == std::string::npos);
  CHECK(s.rest.find('\033') == std::string::npos);
  const auto lines = screen(r.out);
  for (const auto& line : lines) CHECK_MESSAGE(line.find("% of epoch") == std::string::npos, line);
  for (unsigned e = 1; e <= epochs; ++e)
    CHECK(has_line_starting(lines, fmt::format("epoch {:>3}/{:<3}  ", e, epochs)));
  CHECK(has_line_starting(lines, "done: "));
  CHECK(lines.back().empty());  // the cursor on a fresh line
}

void check_no_live_line(const std::string& out) {
  INFO(out);
  CHECK(out.find('\r') == std::string::npos);
  CHECK(out.find('\033') == std::string::npos);
  CHECK(out.find("% of epoch") == std::string::npos);
  CHECK(out.find("done: ") != std::string::npos);
}

}  // namespace

TEST_CASE("durations read 4s, 3m05s, 1h02m") {
  CHECK(format_duration(0) == "0s");
  CHECK(format_duration(3.2) == "4s");
  CHECK(format_duration(4) == "4s");
  CHECK(format_duration(59.5) == "1m00s");
  CHECK(format_duration(185) == "3m05s");
  CHECK(format_duration(3720) == "1h02m");
  CHECK(format_duration(30 * 3600) == "30h00m");
  CHECK(format_duration(-1) == "?");
  CHECK(format_duration(std::nan("")) == "?");
  CHECK(format_duration(1e300) == ">3y");
  for (const double t : {0.0, 4.0, 185.0, 3720.0}) CHECK(is_duration(format_duration(t)));
  CHECK(!is_duration("?"));
  CHECK(!is_duration("3m5s"));
}

TEST_CASE("the live line names epoch, share of the epoch, rate and both ETAs, cut to the width") {
  LiveProgress p;
  p.epochs_done = 2;
  p.epochs = 10;
  p.epoch_rows = 10000000;
  p.epoch_samples = 4120000;
  p.samples = 2 * p.epoch_rows + p.epoch_samples;
  p.total = 10 * p.epoch_rows;
  p.rate = 1.23e6;
  const std::string full = "epoch 3/10  41.2% of epoch  1.23M examples/s  ETA epoch 5s, run 1m02s";
  CHECK(format_live_progress(p, 200) == full);
  CHECK(format_live_progress(p, full.size()) == full);
  CHECK(format_live_progress(p, 20) == full.substr(0, 20));
  CHECK(format_live_progress(p, 0).empty());
  p.rate = 0;  // no rate yet
  CHECK(format_live_progress(p, 200) ==
        "epoch 3/10  41.2% of epoch  0 examples/s  ETA epoch ?, run ?");
  p.rate = 2e3;
  p.epoch_samples = p.epoch_rows;
  CHECK(format_live_progress(p, 200).find("100.0% of epoch  2.0k examples/s  ETA epoch 0s") !=
        std::string::npos);
}

TEST_CASE("the trainer reports live progress while epochs run") {
  auto [tr, te] = test::generated_problem(kRows, 1000, 2000, 20, 0.05, 3);
  for (const Mode mode : {Mode::serial, Mode::hogwild}) {
    CAPTURE(to_string(mode));
    TrainConfig c;
    c.model = "mlp";
    c.model_options.hidden = {kHidden};
    c.mode = mode;
    c.workers = 2;
    c.epochs = 3;
    c.step_size.lr0 = 0.1f;
    std::vector<LiveProgress> live;
    unsigned evaluations = 0;
    train(c, tr, &te, [&](const Progress&) { ++evaluations; },
          [&](const LiveProgress& p) { live.push_back(p); });  // joined before train returns
    CHECK(evaluations == 3);
    REQUIRE(!live.empty());
    for (std::size_t i = 0; i < live.size(); ++i) {
      const LiveProgress& p = live[i];
      CAPTURE(i);
      CHECK(p.epochs == 3);
      CHECK(p.epochs_done < 3);
      CHECK(p.epoch_rows == kRows);
      CHECK(p.total == 3 * kRows);
      CHECK(p.epoch_samples <= p.epoch_rows);
      CHECK(p.samples >= std::uint64_t{p.epochs_done} * kRows + p.epoch_samples);
      CHECK(p.samples <= p.total);
      CHECK(p.rate >= 0);
      CHECK(p.epoch_time >= 0);
      CHECK(p.epoch_time <= p.time);
      if (i > 0) {
        CHECK(p.time - live[i - 1].time >= 0.099);  // at most every 100 ms
        CHECK(p.samples >= live[i - 1].samples);
        CHECK(p.epochs_done >= live[i - 1].epochs_done);
      }
    }
    CHECK(live.back().rate > 0);
  }
}

TEST_CASE("hogwild_train draws the live line on a terminal only" * doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  auto [tr, te] = test::generated_problem(kRows, 1000, 2000, 20, 0.05, 3);
  const std::string train_file = dir.file("train.cache");
  write_cache(tr, train_file);
  setenv("HOGWILD_PROGRESS_DELAY", "0", 1);  // inherited by every run below
  const auto args = [&](const char* mode, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{test::hogwild_train_path(), "--train", train_file, "--mode", mode,
                               "--model", "mlp", "--hidden", std::to_string(kHidden),
                               "--workers", "2", "--epochs", "3", "--lr", "0.1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  INFO("hogwild, two workers, on a terminal");
  check_terminal_output(run_in_pty(args("hogwild")), 3);
  INFO("serial, on a terminal");
  check_terminal_output(run_in_pty(args("serial")), 3);
  INFO("hogwild, piped");
  const auto piped = test::run(args("hogwild"));
  CHECK(piped.exit_code == 0);
  check_no_live_line(piped.out);
  CHECK(piped.out.find("\nepoch   3/3  ") != std::string::npos);
  INFO("serial, --quiet on a terminal");
  const auto quiet = run_in_pty(args("serial", {"--quiet"}));
  CHECK(quiet.exit_code == 0);
  check_no_live_line(quiet.out);
  CHECK(quiet.out.find("epoch ") == std::string::npos);
  unsetenv("HOGWILD_PROGRESS_DELAY");
}
