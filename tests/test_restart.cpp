// Worker restart: a worker that dies (SIGKILL, abort) is respawned and continues its
// partition from its progress record; beyond --max-restarts the run stops.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>

#include "hogwild/error.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/trainer.hpp"
#include "ridge.hpp"
#include "support.hpp"
#include "trainer/run.hpp"

using namespace hogwild;

namespace {

using test::shared_flag;

// Whether `out` has a progress line of a fraction of an epoch ("epoch   20.50 ...").
bool fraction_line(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("epoch ")) continue;
    const auto first = line.find_first_not_of(' ', 6);
    if (first == std::string::npos) continue;
    const auto epoch = line.substr(first, line.find(' ', first) - first);
    if (epoch.find('.') != std::string::npos) return true;
  }
  return false;
}

// Aborts the worker that meets row `row` first (inside the mini-batch, so in lock
// mode while holding the lock): once per run, or on every visit when `always`.
struct CrashAt {
  std::uint32_t row;
  bool always;
  void operator()(std::uint32_t r, const ParamSet&) const {
    if (r == row && (always || shared_flag().exchange(1) == 0)) std::abort();
  }
};

using CrashOnce = test::Ridge<CrashAt>;

double accuracy_in(const std::string& out) {
  auto pos = out.find("test accuracy ");
  return pos == std::string::npos ? -1 : std::stod(out.substr(pos + 14));
}

}  // namespace

TEST_CASE("a worker that dies mid-epoch is respawned and finishes its partition exactly once") {
  const Dataset d = test::linear_data(8000);
  // With replicas (merge_every) the position is published only at merges, so the
  // respawned worker retrains the rows whose updates died with its predecessor's copy;
  // a parameter server's replica (ps) publishes it at its pushes.
  // A parameter server's replica (ps) publishes its place at its pushes: what it
  // had not pushed dies with it, and its respawn trains those rows again.
  for (auto [m, merge_every] : {std::pair{Mode::hogwild, 0}, std::pair{Mode::lock, 0},
                                std::pair{Mode::hogwild, 500}, std::pair{Mode::ps, 0}}) {
    const std::string label = std::string(to_string(m)) + " merge every " + std::to_string(merge_every);
    INFO(label);  // (clang 14 captures no structured binding)
    shared_flag().store(0);
    CrashOnce model(CrashAt{6000, false});  // whichever worker row 6000 falls to
    TrainConfig c;
    c.mode = m;
    c.merge_every = static_cast<std::size_t>(merge_every);
    c.workers = 2;
    c.epochs = 3;
    c.step_size.lr0 = 0.05f;
    auto r = train(c, model, d, &d);
    CHECK(shared_flag().load() == 1);  // it did crash
    CHECK(r.restarts == 1);
    // lock: the worker died holding the mode's mutex, which the next taker recovered.
    CHECK(r.lock_recoveries == (m == Mode::lock ? 1u : 0u));
    // Rows done before the crash are not counted twice (the respawned worker
    // resumes from the published position).
    CHECK(r.samples == 3 * d.rows());
    CHECK(r.history.size() >= 3);
    CHECK(r.history.back().restarts == 1);
    CHECK(r.parameters.at("theta")[0] == doctest::Approx(2.0).epsilon(0.02));
    CHECK(r.parameters.at("theta")[1] == doctest::Approx(-1.0).epsilon(0.02));
  }
}

TEST_CASE("beyond --max-restarts the run stops with a clear error and leaves nothing behind") {
  const Dataset d = test::linear_data(2000);
  const auto before = test::our_shm_entries();
  CrashOnce model(CrashAt{1500, true});
  TrainConfig c;
  c.workers = 2;
  c.partition = Partition::contiguous;  // so that row 1500 is worker 1's,
  c.balance = Balance::fixed;           // and worker 1's alone (no thief takes it)
  c.epochs = 2;
  c.max_restarts = 2;
  try {
    train(c, model, d, &d);
    FAIL("expected WorkerError");
  } catch (const WorkerError& e) {
    const std::string w = e.what();
    MESSAGE(w);
    CHECK(w.find("worker 1") != std::string::npos);
    CHECK(w.find("signal 6") != std::string::npos);
    CHECK(w.find("giving up after 2 restart(s) (--max-restarts 2)") != std::string::npos);
    CHECK(e.exit_code() == kExitWorkerFailed);
  }
  CHECK(test::our_shm_entries() == before);
}

TEST_CASE("hogwild_train: a worker SIGKILLed at 50% is respawned; accuracy within 0.5 points" * doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  auto [train_file, test_file] = test::problem_files(dir, 100000);
  const std::vector<std::string> args{"--train", train_file, "--test", test_file, "--workers", "2",
                                      "--epochs", "40", "--lr", "0.2", "--lr-decay", "0.85",
                                      "--seed", "3"};
  auto base = args;
  base.insert(base.begin(), test::hogwild_train_path());
  auto undisturbed = test::run(base);
  REQUIRE(undisturbed.exit_code == 0);

  auto killed = args;
  killed.insert(killed.end(), {"--metrics", dir.file("m.jsonl"), "--summary", dir.file("s.json")});
  auto bg = test::start_train(killed, dir);
  auto workers = test::wait_for_workers(bg.pid, 2);
  REQUIRE(workers.size() == 2);
  // Wait for epoch 20 of 40 to be reported, then kill a worker.
  const bool half = test::wait_for_text(dir.file("m.jsonl"), "\"epoch\":20.0", 120);
  const auto victims = test::children_of(bg.pid);
  CHECK(half);
  REQUIRE(!victims.empty());  // on a loaded machine one worker may already be done
  kill(victims.back(), SIGKILL);
  const int code = test::wait_exit(bg.pid, 120);
  const auto out = test::read_text(bg.out_path);
  INFO(out);
  CHECK(code == 0);
  CHECK(out.find("was killed by signal 9 (Killed); restarting it at epoch") != std::string::npos);
  const auto summary = test::read_text(dir.file("s.json"));
  CHECK(summary.find("\"restarts\": 1") != std::string::npos);
  CHECK(test::read_text(dir.file("m.jsonl")).find("\"restarts\":1") != std::string::npos);
  // The restart is said, and recorded in --metrics; it prints no progress line (a
  // fraction of an epoch, at a rate that counts the respawn): every line is an epoch's.
  CHECK(test::read_text(dir.file("m.jsonl")).find("\"restart\":true") != std::string::npos);
  CHECK_FALSE(fraction_line(out));
  const double a = accuracy_in(out), b = accuracy_in(undisturbed.out);
  MESSAGE("accuracy after a restart " << a << ", undisturbed " << b);
  CHECK(b > 0.8);
  CHECK(std::abs(a - b) <= 0.005);
}

TEST_CASE("hogwild_train: a stopped worker is a stall: said, killed and respawned, or exit 3 naming it" *
          doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  auto [train_file, test_file] = test::problem_files(dir, 20000);
  for (const unsigned restarts : {1u, 0u}) {
    CAPTURE(restarts);
    auto bg = test::start_train({"--train", train_file, "--workers", "2", "--epochs", "100000",
                                 "--stall-timeout", "1", "--max-restarts",
                                 std::to_string(restarts), "-q"},
                                dir);
    auto workers = test::wait_for_workers(bg.pid, 2);
    REQUIRE(workers.size() == 2);
    kill(workers[1], SIGSTOP);  // as a debugger or ^Z would (it was waited for in silence)
    const std::string said = "finished no example for ";
    if (restarts) {
      CHECK(test::wait_for_text(bg.out_path, "restarting it at epoch", 60));
      kill(bg.pid, SIGINT);
      CHECK(test::wait_exit(bg.pid, 60) == kExitInterrupted);
    } else {
      CHECK(test::wait_exit(bg.pid, 60) == kExitWorkerFailed);
    }
    const auto out = test::read_text(bg.out_path);
    INFO(out);
    CHECK(out.find(fmt::format("worker 1 (pid {}) {}", workers[1], said)) != std::string::npos);
    CHECK(out.find("(--stall-timeout 1), in epoch ") != std::string::npos);
    if (!restarts) CHECK(out.find("--max-restarts 0, so the run stopped") != std::string::npos);
    CHECK(test::all_gone_within(workers, 5));
  }
}

TEST_CASE("hogwild_train --mode ddp: a stopped worker is the one named, within the timeout" *
          doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  auto [train_file, test_file] = test::problem_files(dir, 20000);
  auto bg = test::start_train({"--train", train_file, "--mode", "ddp", "--workers", "2", "--epochs",
                               "100000", "--comm-timeout", "2", "--max-restarts", "0", "-q"},
                              dir);
  auto workers = test::wait_for_workers(bg.pid, 2);
  REQUIRE(workers.size() == 2);
  kill(workers[1], SIGSTOP);  // its partner waits for it in the gradient's all-reduce
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(test::wait_exit(bg.pid, 60) == kExitWorkerFailed);
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto out = test::read_text(bg.out_path);
  INFO(out);
  // The last line blames the stopped worker, not the healthy one that timed out
  // waiting for it; the run does not wait for the stop flag to reach a stopped process.
  CHECK(out.find(fmt::format("error: worker 1 (pid {}) did not reach a collective that worker 0 "
                             "waited 2 s for", workers[1])) != std::string::npos);
  CHECK(out.find("it is stopped, traced or stuck") != std::string::npos);
  CHECK(after < 2 + 3);
  CHECK(test::all_gone_within(workers, 5));
}

TEST_CASE("a respawned worker's finish of an epoch is counted once") {
  // Killed after it counted its finish (while copying the snapshot, say), a worker
  // is respawned, finds its epoch done and gets here again: counted twice, the
  // epoch looked finished by all while the other worker still trained it.
  const Dataset d = test::linear_data(1000);
  test::Ridge<> model;
  TrainConfig c;
  c.mode = Mode::hogwild;
  c.workers = 2;
  c.epochs = 3;
  detail::Run run(c, model, d, &d);
  CHECK_FALSE(run.count_finish(0, 0));
  CHECK_FALSE(run.count_finish(0, 0));  // worker 0 again, respawned
  CHECK(run.count_finish(1, 0));        // worker 1 is the last
  CHECK_FALSE(run.count_finish(1, 1));
  CHECK(run.count_finish(0, 1));
}

