// Signals and the death of the parent, end to end: SIGINT/SIGTERM write the final
// checkpoint and the summary and exit 130/143; a second SIGINT exits at once; a
// parent killed with -9 takes its workers within a second and leaves nothing in
// /dev/shm; --cleanup removes only this tool's dead segments of this user.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "hogwild/checkpoint.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

// /dev/shm entries whose name carries `pid` as creator ("hogwild-<uid>-<pid>-...").
std::size_t entries_of(pid_t pid) {
  std::size_t n = 0;
  std::string tag = "-";
  tag += std::to_string(pid);
  tag += '-';
  for (auto& e : test::our_shm_entries()) n += e.find(tag) != std::string::npos;
  return n;
}

// A segment named like ours, created directly (as a run killed between create and
// unlink would leave it).
std::string fake_segment(const std::string& name) {
  int fd = shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  close(fd);
  return name;
}

bool shm_exists(const std::string& name) {
  return std::filesystem::exists("/dev/shm/" + name);
}

// "hogwild-<uid>-<pid>-<suffix>", the arena's naming scheme.
std::string segment_name(long uid, pid_t pid, const char* suffix) {
  std::string s = "hogwild-";
  s += std::to_string(uid);
  s += '-';
  s += std::to_string(pid);
  s += '-';
  s += suffix;
  return s;
}

pid_t dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}

}  // namespace

TEST_CASE("SIGINT/SIGTERM write the final checkpoint and the summary, exit 130/143; resume finishes") {
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 20000);
  for (int sig : {SIGINT, SIGTERM}) {
    INFO(strsignal(sig));
    const std::string ck = dir.file("ck.bin"), summary = dir.file("s.json");
    std::filesystem::remove(ck);
    std::vector<std::string> args{"--train", train, "--test", test_file, "--workers", "2",
                                  "--epochs", "2000", "--lr", "0.1", "--checkpoint", ck,
                                  "--summary", summary};
    auto bg = test::start_train(args, dir);
    auto workers = test::wait_for_workers(bg.pid, 2);
    REQUIRE(workers.size() == 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(bg.pid, sig);
    const int code = test::wait_exit(bg.pid, 30);
    const auto out = test::read_text(bg.out_path);
    INFO(out);
    CHECK(code == (sig == SIGINT ? 130 : 143));
    CHECK(out.find(sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)") !=
          std::string::npos);
    CHECK(test::all_gone_within(workers, 1));
    CHECK(entries_of(bg.pid) == 0);
    const auto s = test::read_text(summary);
    CHECK(s.find(sig == SIGINT ? "\"interrupted\": \"SIGINT\"" : "\"interrupted\": \"SIGTERM\"") !=
          std::string::npos);
    const Checkpoint c = read_checkpoint(ck);
    CHECK(c.epochs_done() < 2000);
    std::uint64_t saved = 0;
    for (auto& w : c.workers) saved += w.samples;
    CHECK(saved > 0);
    if (sig == SIGTERM) {  // continue that run to the end, with fewer epochs in all
      unsigned target = 0;
      for (auto& w : c.workers) target = std::max(target, w.epochs_done + 3);
      args[7] = std::to_string(target);
      args.insert(args.end(), {"--resume", ck});
      auto r = test::run_train(args, {}, 120);
      INFO(r.out);
      CHECK(r.exit_code == 0);
      CHECK(test::read_text(summary).find("\"samples\": " + std::to_string(target * 20000ull)) !=
            std::string::npos);
      CHECK(read_checkpoint(ck).epochs_done() == target);
    }
  }
}

TEST_CASE("standard output closed under the run (| head): it stops as on SIGTERM, writes everything, 141") {
  // hogwild_train's lines go down a pipe whose reader leaves after five (the data,
  // the model, the layout and memory lines, the first epoch's). The process ignores
  // SIGPIPE; its first failed write stops the run as SIGTERM would: the final
  // checkpoint, the summary and the model are written, and it exits 141, SIGPIPE's
  // status, instead of dying of the signal with none of them.
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 2000);
  const std::string ck = dir.file("ck.bin"), summary = dir.file("s.json"), model = dir.file("m.st");
  const std::string command = fmt::format(
      "(\"{}\" --train {} --test {} --workers 2 --epochs 5000 --checkpoint {} --summary {} "
      "--save-model {}; echo \"exit $?\" >&2) | head -n 5 >/dev/null",
      test::hogwild_train_path(), train, test_file, ck, summary, model);
  const auto r = test::run({"/bin/sh", "-c", command + " 2>&1"});
  INFO(r.out);
  CHECK(r.out.find("hogwild: stopping (standard output closed)") != std::string::npos);
  CHECK(r.out.find("exit 141") != std::string::npos);
  CHECK(test::read_text(summary).find("\"interrupted\": \"SIGPIPE\"") != std::string::npos);
  CHECK(read_checkpoint(ck).epochs_done() < 5000);
  CHECK(std::filesystem::file_size(model) > 0);
  CHECK(test::our_shm_entries().empty());
  // The same with the metrics on standard output (--metrics -): a stop, 141.
  std::filesystem::remove(summary);
  const auto json = test::run({"/bin/sh", "-c", fmt::format(
      "(\"{}\" --train {} --test {} --workers 2 --epochs 5000 --metrics - --summary {}; "
      "echo \"exit $?\" >&2) | head -n 2 >/dev/null 2>&1",
      test::hogwild_train_path(), train, test_file, summary) + " 2>&1"});
  INFO(json.out);
  CHECK(json.out.find("exit 141") != std::string::npos);
  CHECK(test::read_text(summary).find("\"interrupted\": \"SIGPIPE\"") != std::string::npos);
  // Closed before training: nothing starts, and nothing is written.
  std::filesystem::remove(summary);
  const auto before = fmt::format(
      "(sleep 0.3; \"{}\" --train {} --epochs 5 --summary {}; echo \"exit $?\" >&2) | true",
      test::hogwild_train_path(), train, summary);
  const auto b = test::run({"/bin/sh", "-c", before + " 2>&1"});
  INFO(b.out);
  CHECK(b.out.find("standard output closed before training; not started") != std::string::npos);
  CHECK(b.out.find("exit 141") != std::string::npos);
  CHECK(!std::filesystem::exists(summary));
}

TEST_CASE("a run started with SIGINT ignored (a script's background job) keeps ignoring it") {
  // A shell starts `cmd &` with SIGINT ignored so that a ^C meant for the foreground
  // does not reach it; the run installed its own handler all the same and stopped.
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 2000);
  const auto r = test::run({"/bin/sh", "-c", fmt::format(
      "(trap '' INT; exec \"{}\" --train {} --workers 2 --epochs 1000000 -q) & p=$!; sleep 1; "
      "kill -INT $p; sleep 0.5; kill -0 $p && echo alive after SIGINT; kill -TERM $p; wait $p; "
      "echo \"exit $?\"", test::hogwild_train_path(), train) + " 2>&1"});
  INFO(r.out);
  CHECK(r.out.find("alive after SIGINT") != std::string::npos);
  CHECK(r.out.find("terminated (SIGTERM)") != std::string::npos);
  CHECK(r.out.find("exit 143") != std::string::npos);
  CHECK(test::our_shm_entries().empty());
}

namespace {

// `sig` sent to the run's whole process group while it trains: the workers end
// their batch (not killed by it: "killed by signal ... while the run stopped"), the
// parent says so, writes the final checkpoint and summary, leaves no segment and no
// temporary, and exits 128 + sig.
void stop_the_whole_group(int sig, const std::string& said, const std::string& line,
                          const std::string& interrupted) {
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 20000);
  const std::string ck = dir.file("ck.bin"), summary = dir.file("s.json");
  auto bg = test::start_train({"--train", train, "--test", test_file, "--workers", "2", "--epochs",
                               "2000", "--checkpoint", ck, "--summary", summary},
                              dir, "out.txt", true);
  auto workers = test::wait_for_workers(bg.pid, 2);
  REQUIRE(workers.size() == 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(kill(-bg.pid, sig) == 0);
  const int code = test::wait_exit(bg.pid, 30);
  const auto out = test::read_text(bg.out_path);
  INFO(out);
  CHECK(code == 128 + sig);
  CHECK(out.find(said) != std::string::npos);
  CHECK(out.find(line) != std::string::npos);
  CHECK(out.find("killed by signal") == std::string::npos);
  CHECK(test::read_text(summary).find("\"interrupted\": \"" + interrupted + "\"") != std::string::npos);
  CHECK(test::all_gone_within(workers, 1));
  CHECK(entries_of(bg.pid) == 0);
  std::uint64_t saved = 0;
  for (auto& w : read_checkpoint(ck).workers) saved += w.samples;
  CHECK(saved > 0);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

}  // namespace

TEST_CASE("a SIGTERM to the whole process group: workers end their batch, the run stops as with one") {
  // systemd and timeout signal the whole group: the workers get SIGTERM too.
  stop_the_whole_group(SIGTERM, "hogwild: stopping (SIGTERM", "terminated (SIGTERM)", "SIGTERM");
}

TEST_CASE("a hang-up (SIGHUP to the whole group, an ssh session closed) stops the run as SIGTERM does") {
  // It killed the parent and the workers by the default action: no final checkpoint,
  // no summary, and the checkpoint's temporary left behind.
  stop_the_whole_group(SIGHUP, "hogwild: stopping (SIGHUP", "stopped (SIGHUP)", "SIGHUP");
}

TEST_CASE("a SIGTERM to one worker alone: it ends its batch, exits 143 and is respawned") {
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 20000);
  auto bg = test::start_train({"--train", train, "--test", test_file, "--workers", "2", "--epochs",
                               "400", "--summary", dir.file("s.json")},
                              dir);
  auto workers = test::wait_for_workers(bg.pid, 2);
  REQUIRE(workers.size() == 2);
  REQUIRE(kill(workers[1], SIGTERM) == 0);
  const int code = test::wait_exit(bg.pid, 120);
  const auto out = test::read_text(bg.out_path);
  INFO(out);
  CHECK(code == 0);
  CHECK(out.find("exited with status 143; restarting it") != std::string::npos);
  CHECK(test::read_text(dir.file("s.json")).find("\"samples\": " + std::to_string(400 * 20000)) !=
        std::string::npos);
}

TEST_CASE("the same stop twice at once (timeout(1), a group kill) is one stop: checkpoint, summary, 143") {
  // timeout signals its child, then the child's group: the parent got SIGTERM twice
  // within microseconds and exited at once, writing nothing (with the fork server,
  // 3 runs of 3).
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 20000);
  const std::string ck = dir.file("ck.bin"), summary = dir.file("s.json");
  for (const std::string start : {"fork-server", "fork"}) {
    CAPTURE(start);
    std::filesystem::remove(ck);
    std::filesystem::remove(summary);
    auto bg = test::start_program({"/usr/bin/timeout", "120", test::hogwild_train_path(),
                                   "--train", train, "--workers", "2", "--epochs", "100000",
                                   "--worker-start", start, "--checkpoint", ck, "--summary",
                                   summary, "-q"},
                                  dir, "out.txt", true);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    REQUIRE(kill(-bg.pid, SIGTERM) == 0);
    test::wait_exit(bg.pid, 60);  // timeout's own status
    const auto out = test::read_text(bg.out_path);
    INFO(out);
    CHECK(out.find("hogwild: stopping (SIGTERM)") != std::string::npos);
    CHECK(out.find("terminated (SIGTERM)") != std::string::npos);
    CHECK_NOTHROW(read_checkpoint(ck));
    CHECK(test::read_text(summary).find("\"interrupted\": \"SIGTERM\"") != std::string::npos);
  }
  // Two SIGTERMs to the parent alone, 0 and 1 ms apart.
  for (int delay_ms : {0, 1}) {
    std::filesystem::remove(ck);
    auto bg = test::start_train({"--train", train, "--workers", "2", "--epochs", "100000",
                                 "--checkpoint", ck, "-q"},
                                dir);
    REQUIRE(test::wait_for_workers(bg.pid, 2).size() == 2);
    kill(bg.pid, SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(bg.pid, SIGTERM);
    CHECK(test::wait_exit(bg.pid, 60) == 143);
    CHECK(test::read_text(bg.out_path).find("terminated (SIGTERM)") != std::string::npos);
    CHECK_NOTHROW(read_checkpoint(ck));
  }
}

TEST_CASE("a second SIGINT once the stop is said exits at once: 130, no segment, no temporary file left") {
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 4000, 2000000);  // 8 MB checkpoints
  const std::string ck = dir.file("ck.bin");
  for (int delay_ms : {0, 1, 3}) {
    auto bg = test::start_train({"--train", train, "--workers", "2", "--epochs", "100000",
                                 "--checkpoint", ck, "--checkpoint-every", "0.001", "-q"},
                                dir);
    auto workers = test::wait_for_workers(bg.pid, 2);
    REQUIRE(workers.size() == 2);
    kill(bg.pid, SIGINT);
    // A second signal forces only after the stop was said, and a moment after the first.
    for (int i = 0; i < 400; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(5)))
      if (test::read_text(bg.out_path).find("hogwild: stopping") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(260 + delay_ms));
    kill(bg.pid, SIGINT);
    CHECK(test::wait_exit(bg.pid, 10) == 130);
    CHECK(test::all_gone_within(workers, 1));
    CHECK(entries_of(bg.pid) == 0);
    for (auto& e : std::filesystem::directory_iterator(dir.path()))
      CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
    if (std::filesystem::exists(ck)) CHECK_NOTHROW(read_checkpoint(ck));
  }
}

TEST_CASE("kill -9 of the parent, 30 times: workers exit within a second, --cleanup, nothing left") {
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 2000, 200);
  std::srand(7);
  int with_workers = 0;
  for (int i = 0; i < 30; ++i) {
    auto bg = test::start_train({"--train", train, "--workers", "2", "--epochs", "1000000", "-q"},
                                dir);
    // Even kills land anywhere in start-up (parsing, creating the arena, forking); odd kills
    // wait for the workers first, so both cases are covered however slow start-up is (a
    // sanitizer build on a busy machine can take longer than any fixed delay).
    if (i % 2 == 1) {
      REQUIRE(test::wait_for_workers(bg.pid, 2).size() == 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(std::rand() % 20));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::rand() % 60));
    }
    const auto workers = test::children_of(bg.pid);
    with_workers += !workers.empty();
    kill(bg.pid, SIGKILL);
    CHECK(test::wait_exit(bg.pid, 10) == -SIGKILL);
    CHECK(test::all_gone_within(workers, 1));
    auto r = test::run({test::hogwild_train_path(), "--cleanup"});
    CHECK(r.exit_code == 0);
    CHECK(entries_of(bg.pid) == 0);
  }
  MESSAGE(with_workers << " of 30 kills hit a running run (the rest hit start-up)");
  CHECK(with_workers >= 15);
}

TEST_CASE("--cleanup and the next run remove only this tool's dead segments of this user") {
  const long uid = getuid();
  const std::string dead = fake_segment(segment_name(uid, dead_pid(), "00000000deadbeef"));
  const std::string alive = fake_segment(segment_name(uid, getpid(), "00000000a11fe000"));
  const std::string other_uid = fake_segment(segment_name(uid + 4242, dead_pid(), "00000000000000aa"));
  const std::string not_ours = fake_segment("hogwildish-" + std::to_string(uid) + "-1-x");
  // Named like ours but owned by someone else (only root can arrange that).
  std::string foreign;
  if (getuid() == 0) {
    foreign = fake_segment(segment_name(0, dead_pid(), "00000000f0e1a000"));
    REQUIRE(chown(("/dev/shm/" + foreign).c_str(), 65534, 65534) == 0);
  }
  auto r = test::run({test::hogwild_train_path(), "--cleanup"});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("removed /dev/shm/" + dead) != std::string::npos);
  CHECK_FALSE(shm_exists(dead));
  CHECK(shm_exists(alive));
  CHECK(shm_exists(other_uid));
  CHECK(shm_exists(not_ours));
  if (!foreign.empty()) CHECK(shm_exists(foreign));

  // A normal run finds a dead segment too.
  const std::string dead2 = fake_segment(segment_name(uid, dead_pid(), "00000000deadbee2"));
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 200, 50);
  auto run = test::run({test::hogwild_train_path(), "--train", train, "--epochs", "1", "-q"});
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("removed /dev/shm/" + dead2) != std::string::npos);
  CHECK_FALSE(shm_exists(dead2));
  for (auto& n : {alive, other_uid, not_ours, foreign})
    if (!n.empty()) shm_unlink(("/" + n).c_str());
}

TEST_CASE("hogwild_data stopped by SIGINT or SIGTERM while it writes leaves no temporary") {
  test::TempDir dir;
  // 200,000 rows of 40 non-zeros, converted to gzip'ed text: seconds of compression
  // in which to stop it.
  const std::string in = dir.file("in.cache"), out = dir.file("out.svm.gz");
  REQUIRE(test::run({test::hogwild_data_path(), "generate", "--rows", "200000", "--features",
                     "50000", "--nnz-per-row", "40", "--out", in})
              .exit_code == 0);
  for (const int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const auto bg = test::start_program(
        {test::hogwild_data_path(), "convert", in, "--format", "libsvm", "--out", out}, dir);
    const std::string tmp = out + ".tmp." + std::to_string(bg.pid);
    bool writing = false;  // the temporary has bytes (not the empty probe of the path before)
    for (int i = 0; i < 30000 && !writing; ++i) {  // up to 30 s (a sanitised build loads slowly)
      std::error_code e;
      writing = std::filesystem::file_size(tmp, e) > 0 && !e;
      if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(writing);
    ::kill(bg.pid, sig);
    CHECK(test::wait_exit(bg.pid, 60) == -sig);  // ended by the signal, as without the handler
    CHECK_FALSE(std::filesystem::exists(tmp));
    CHECK_FALSE(std::filesystem::exists(out));
  }
}
