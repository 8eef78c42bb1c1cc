// hogwild_train end to end as a user runs it: real files, real processes, real
// signals; exit statuses, messages, and nothing left in /dev/shm.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hogwild/data_io.hpp"
#include "hogwild/options.hpp"
#include "comm/gloo.hpp"
#include "support.hpp"

using namespace hogwild;
using test::run;
using test::problem_files;
using test::children_of;
using test::wait_for_workers;
using test::wait_exit;

namespace {

std::vector<std::string> long_run(const std::string& train, const std::string& test, const char* mode) {
  return {"--train", train, "--test", test, "--workers", "2", "--mode", mode, "--epochs", "100000",
          "--lr", "0.1"};
}

}  // namespace

TEST_CASE("--help documents every option and --version prints the version") {
  auto r = run({test::hogwild_train_path(), "--help"});
  CHECK(r.exit_code == 0);
  for (const char* opt : {"--train", "--test", "--metrics", "--summary", "--cleanup", "--version"})
    CHECK_MESSAGE(r.out.find(opt) != std::string::npos, opt);
  // Every training option the library declares, under its concern's heading.
  for (const auto& o : train_options()) {
    if (!o.command_line) continue;
    CHECK_MESSAGE(r.out.find("  --" + o.name + " ") != std::string::npos, o.name);
  }
  CHECK(r.out.find("Optimiser:") < r.out.find("  --lr "));
  auto v = run({test::hogwild_train_path(), "--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out.find("hogwild_train 0.") != std::string::npos);
}

TEST_CASE("bad options exit 2 with a clear message") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 200);
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  for (const auto& c : std::vector<Case>{
           {{"--train", train, "--mode", "wild"}, "unknown mode \"wild\""},
           {{"--train", train, "--model", "svm"}, "unknown model \"svm\""},
           {{"--train", train, "--optimizer", "adam"}, "unknown optimizer \"adam\""},
           {{"--train", train, "--workers", "0"}, "--workers"},
           {{"--train", train, "--workers", "many"}, "--workers"},
           {{"--train", train, "--lr", "-1"}, "--lr"},
           // Unsigned options wrapped "-1" to 2^64 - 1, and TBB crashed on 100000 threads.
           {{"--train", train, "--batch", "-1"}, "--batch: expected a whole number of 0 or more, got -1"},
           {{"--train", train, "--seed", "-1"}, "--seed: expected a whole number of 0 or more, got -1"},
           {{"--train", train, "--epochs", "-3"}, "--epochs: expected a whole number of 0 or more"},
           {{"--train", train, "--device-warps", "-8"}, "--device-warps: expected a whole number"},
           {{"--train", train, "--threads", "100000"}, "--threads: expected 0 (all cores) to 1024, got 100000"},
           {{"--train", train, "--comm-timeout", "0"},
            "--comm-timeout must be more than 0 and at most 86400 seconds, got 0"},
           {{"--train", train, "--frobnicate"}, "frobnicate"},
           {{"--test", test_file}, "--train is required"},
           {{"--train", dir.file("missing.svm")}, "missing.svm"},
           {{"--train", train, "--metrics", dir.file("no/dir/m.jsonl")}, "no/dir/m.jsonl"},
           {{"--train", train, "--checkpoint", dir.file("no/dir/ck.bin")}, "no/dir/ck.bin"},
           {{"--train", train, "--checkpoint-every", "5"}, "--checkpoint-every needs --checkpoint"},
           {{"--train", train, "--resume", dir.file("missing.ckpt")}, "missing.ckpt"},
           {{"--train", train, "--resume", train}, "not a hogwild checkpoint"},
           {{"--train", train, "--mode", "lock", "--merge-every", "64"},
            "--merge-every works with --mode hogwild or atomic, not lock"},
           {{"--train", train, "--merge-every", "64", "--hot-k", "8"}, "exclude each other"},
           {{"--train", train, "--partition", "random"},
            "--partition must be shuffled or contiguous, got \"random\""},
           {{"--train", train, "--storage", "packed"},
            "--storage expects auto, sparse or dense, got \"packed\""},
           {{"--train", train, "--worker-start", "spawn"},
            "--worker-start must be fork or fork-server, not 'spawn'"},
           {{"--train", train, "--mode", "ddp", "--nodes", "2", "--node-rank", "2", "--rendezvous",
             "file:" + dir.path().string()},
            "--node-rank 2 is out of range for --nodes 2"},
           {{"--train", train, "--mode", "ddp", "--nodes", "2"}, "--nodes needs --rendezvous"},
           {{"--train", train, "--mode", "ddp", "--comm", "mpi"}, "--comm must be shm or gloo"},
           {{"--train", train, "--accumulate", "4"}, "--accumulate applies to --mode ddp, not hogwild"},
           {{"--train", train, "--mode", "ddp", "--nodes", "2", "--node-rank", "0", "--rendezvous",
             "tcp://x:1"},
            "tcp://x:1"},
           {{"--train", train, "--sync-every", "2x"},
            "--sync-every expects a positive number of examples (500) or of seconds (2s, 250ms), "
            "got \"2x\""},
           {{"--train", train, "--sync-every", "0ms"}, "got \"0ms\""},
           {{"--train", train, "--sync-every", "1.5"}, "got \"1.5\""},
           {{"--train", train, "--sync-every", "250ms"}, "--sync-every works with --nodes 2 or more"},
           {{"--train", train, "--straggler", "1"},
            "--straggler expects W:FACTOR (worker W's updates FACTOR times as long, e.g. 1:3), "
            "got \"1\""},
           {{"--train", train, "--straggler", "a:2"}, "got \"a:2\""},
           {{"--train", train, "--straggler", "1:2x"}, "got \"1:2x\""},
           {{"--train", train, "--workers", "2", "--straggler", "2:2"}, "there is no worker 2"},
           // The option parser's own errors, said as the others are.
           {{"--train", train, "--bogus"},
            "hogwild_train: error: The following argument was not expected: --bogus (see --help)"},
           {{"--train", train, "--epochs", "1e9"},
            "hogwild_train: error: --epochs: expected a whole number of 0 or more, got 1e9 (see --help)"},
       }) {
    auto r = test::run_train(c.args);
    INFO(r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find(c.needle) != std::string::npos);
  }
}

TEST_CASE("an output that would overwrite an input or another output is refused before anything is written") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 400);
  const std::string data = test::read_text(train);
  std::filesystem::create_symlink(train, dir.file("link.svm"));
  for (const auto& [args, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--metrics", train}, "--metrics " + train + " is the --train file"},
           {{"--summary", dir.file("link.svm")},  // through a link
            "--summary " + dir.file("link.svm") + " is the --train file"},
           {{"--checkpoint", test_file}, "--checkpoint " + test_file + " is the --test file"},
           {{"--metrics", dir.file("out.json"), "--summary", dir.file("out.json")},
            "--summary " + dir.file("out.json") + " is also the --metrics file"},
           // Outputs that cannot be written fail before the training, not after it.
           {{"--summary", dir.path().string()},
            "cannot write the summary to " + dir.path().string() + ": it is a directory"},
           {{"--checkpoint", "/proc/hogwild-ck"}, "cannot write checkpoints to /proc/hogwild-ck: "},
       }) {
    auto r = test::run_train({"--train", train, "--test", test_file, "--epochs", "1"}, args);
    INFO(r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("hogwild_train: error: " + needle) != std::string::npos);
    CHECK(r.out.find("epoch") == std::string::npos);  // refused before training
    CHECK(test::read_text(train) == data);  // the data is as it was
    CHECK_FALSE(std::filesystem::exists(dir.file("out.json")));
  }
  // What is meant to be replaced is: --checkpoint over the --resume file it continues,
  // and /dev/null as more than one output (through a link of the test's, so that a
  // regression replaces the link, not the machine's /dev/null).
  std::filesystem::create_symlink("/dev/null", dir.file("null"));
  const std::string ck = dir.file("ck");
  CHECK(test::run_train({"--train", train, "--epochs", "1", "--checkpoint", ck}).exit_code == 0);
  auto r = test::run_train({"--train", train, "--epochs", "2", "--checkpoint", ck, "--resume", ck,
                            "--metrics", dir.file("null"), "--summary", dir.file("null")});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(std::filesystem::is_character_file(dir.file("null")));  // written, not replaced by a file
  r = test::run_train({"--train", train, "--epochs", "3", "--resume", ck, "--summary", ck});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--summary " + ck + " is the --resume file") != std::string::npos);
}

TEST_CASE("--summary to a special file (a pipe, /dev/stdout) writes it in place") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 400);
  std::filesystem::create_symlink("/dev/stdout", dir.file("stdout"));  // as in the case above
  auto r = test::run_train({"--train", train, "--epochs", "1", "-q", "--summary", dir.file("stdout")});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  const auto brace = r.out.find('{');
  REQUIRE(brace != std::string::npos);
  CHECK(nlohmann::json::parse(r.out.substr(brace, r.out.rfind('}') - brace + 1))["epochs"] == 1);
  // A named pipe stays a pipe, and its reader gets the summary.
  const std::string fifo = dir.file("summary.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = test::run({"/bin/cat", fifo}, 60).out; });  // 60 s: hang guard
  r = test::run_train({"--train", train, "--epochs", "2", "-q", "--summary", fifo});
  // Had the run not opened the pipe, this releases the reader (end of file).
  if (const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK); fd >= 0) ::close(fd);
  reader.join();
  CHECK(r.exit_code == 0);
  CHECK(std::filesystem::is_fifo(fifo));
  CHECK(std::filesystem::is_symlink(dir.file("stdout")));
  CHECK(nlohmann::json::parse(got)["epochs"] == 2);
}

TEST_CASE("outputs: a link is written through and stays, a descriptor is streamed, a dead writer's temporary goes") {
  namespace fs = std::filesystem;
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 400);
  const auto summary_of = [](const std::string& text) {
    const auto brace = text.find('{');
    REQUIRE(brace != std::string::npos);
    return nlohmann::json::parse(text.substr(brace, text.rfind('}') - brace + 1));
  };
  // A link to a file: the file is replaced, the link stays (it was replaced by a file).
  test::write_text(dir.file("real.json"), "{}\n");
  fs::create_symlink("real.json", dir.file("link.json"));
  // A chain of relative links to a file that does not exist yet: made at the end.
  fs::create_directory(dir.file("sub"));
  fs::create_symlink("sub/hop.json", dir.file("chain.json"));
  fs::create_symlink("../made.json", dir.file("sub/hop.json"));
  for (const auto& [given, written] : {std::pair{"link.json", "real.json"},
                                       std::pair{"chain.json", "made.json"}}) {
    const std::string link = given;  // (clang 14 captures no structured binding)
    CAPTURE(link);
    const auto r = test::run_train({"--train", train, "--epochs", "1", "-q", "--summary",
                                    dir.file(given)});
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(fs::is_symlink(dir.file(given)));
    CHECK(summary_of(test::read_text(dir.file(written)))["epochs"] == 1);
  }
  CHECK(fs::is_symlink(dir.file("sub/hop.json")));
  // Standard output redirected to a file, named as a link to /proc/self/fd/1, as
  // /dev/stdout, or as -: the summary goes into that file, written where it stands
  // (the file was replaced, and the link with it).
  fs::create_symlink("/proc/self/fd/1", dir.file("so"));
  for (const std::string& out : {dir.file("so"), std::string("/dev/stdout"), std::string("-")}) {
    CAPTURE(out);
    const std::string log = dir.file("log.txt");
    const auto r = test::run({"/bin/sh", "-c",
                              "exec \"$0\" --train \"$1\" --epochs 2 --summary \"$2\" > \"$3\"",
                              test::hogwild_train_path(), train, out, log});
    INFO(r.out);
    CHECK(r.exit_code == 0);
    // Standard output, however named, carries the JSON alone; the rest goes to stderr.
    const std::string text = test::read_text(log);
    CHECK(nlohmann::json::parse(text)["epochs"] == 2);
    CHECK(r.out.find("epoch   2/2") != std::string::npos);
    CHECK(fs::is_symlink(dir.file("so")));
  }
  CHECK(fs::is_symlink("/dev/stdout"));
  // A temporary that a killed writer left (its pid is gone) is removed by the next run
  // that writes the path, and by --cleanup; one whose writer lives is left alone.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  REQUIRE(test::wait_exit(dead, 10) == 0);
  const std::string ck = dir.file("ck.bin");
  const std::string stale = ck + ".tmp." + std::to_string(dead);
  const std::string live = ck + ".tmp." + std::to_string(::getpid());
  test::write_text(stale, std::string(100000, 'x'));
  test::write_text(live, "mine");
  auto r = test::run_train({"--train", train, "--epochs", "1", "-q", "--checkpoint", ck});
  CHECK(r.exit_code == 0);
  CHECK(!fs::exists(stale));
  CHECK(fs::exists(live));
  fs::remove(live);
  test::write_text(stale, "x");
  r = test::run({test::hogwild_train_path(), "--cleanup", "--checkpoint", ck});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("removed 1 stale temporary of " + ck) != std::string::npos);
  CHECK(!fs::exists(stale));
  CHECK(fs::exists(ck));
}

TEST_CASE("inputs from a pipe: --train - reads standard input, a FIFO is read to its end, an empty test set is exit 2") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 2000);
  const auto last_line = [](const std::string& out) {
    const auto end = out.find_last_not_of('\n');
    return out.substr(out.rfind('\n', end) + 1);
  };
  const auto on_file = test::run_train({"--train", train, "--test", test_file, "--epochs", "2", "-q"});
  REQUIRE(on_file.exit_code == 0);
  const std::string accuracy = on_file.out.substr(on_file.out.find("test accuracy"));
  // The same rows through standard input, plain and gzip'ed: the same run.
  for (const std::string feed : {"cat", "gzip -c"}) {
    CAPTURE(feed);
    const auto r = test::run({"/bin/sh", "-c", feed + " \"$1\" | exec \"$0\" --train - --test \"$2\" --epochs 2 -q",
                              test::hogwild_train_path(), train, test_file});
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(last_line(r.out).find(accuracy.substr(0, accuracy.find(','))) != std::string::npos);
  }
  // A test set through a FIFO was "0 rows", no evaluation and exit 0.
  const std::string fifo = dir.file("test.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&, &test_file = test_file] {
    test::run({"/bin/sh", "-c", "cat \"$0\" > \"$1\"", test_file, fifo}, 60);
  });
  auto r = test::run_train({"--train", train, "--test", fifo, "--epochs", "2", "-q"});
  if (const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK); fd >= 0) ::close(fd);  // hang guard
  writer.join();
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(accuracy.substr(0, accuracy.find(','))) != std::string::npos);
  // No rows to evaluate on, and bad rows from standard input named as such.
  test::write_text(dir.file("empty.svm"), "");
  r = test::run_train({"--train", train, "--test", dir.file("empty.svm")});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--test " + dir.file("empty.svm") + " has no rows: nothing to evaluate on") !=
        std::string::npos);
  r = test::run({"/bin/sh", "-c", "printf '1 3:x\\n' | exec \"$0\" --train -",
                 test::hogwild_train_path()});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("standard input:1: expected \"index:value\"") != std::string::npos);
}

TEST_CASE("IDX images and labels from pipes: read to their end, the same run as from files") {
  test::TempDir dir;
  // 300 4x4 images in two classes a softmax can tell apart (bright or dark), big-endian headers.
  const std::size_t n = 300;
  std::string images = {0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 4};
  std::string labels = {0, 0, 8, 1, 0, 0, 0, 0};
  images[6] = labels[6] = static_cast<char>(n >> 8);
  images[7] = labels[7] = static_cast<char>(n & 255);
  for (std::size_t i = 0; i < n; ++i) {
    labels += static_cast<char>(i % 2);
    for (int p = 0; p < 16; ++p) images += static_cast<char>(i % 2 ? 200 + (i * 7 + p) % 50 : (i * 5 + p) % 50);
  }
  test::write_text(dir.file("img.idx"), images);
  test::write_text(dir.file("lab.idx"), labels);
  const std::string common =
      R"(--model softmax --epochs 2 --test "$0/img.idx" --test-labels "$0/lab.idx" -q)";
  auto sh = [&](const std::string& line) {
    return test::run({"/bin/bash", "-c", line, dir.path(), test::hogwild_train_path()});
  };
  const auto on_files = sh(R"(exec "$1" --train "$0/img.idx" --train-labels "$0/lab.idx" )" + common);
  REQUIRE(on_files.exit_code == 0);
  const std::string accuracy = on_files.out.substr(on_files.out.find("test accuracy"), 20);
  CHECK(accuracy.find("accuracy 1.0000") != std::string::npos);
  // Labels from standard input or <(...) were "too short for an IDX header (0 bytes)".
  for (const std::string& line :
       {R"(cat "$0/lab.idx" | exec "$1" --train "$0/img.idx" --train-labels - )" + common,
        R"(exec "$1" --train "$0/img.idx" --train-labels <(cat "$0/lab.idx") )" + common,
        R"(exec "$1" --train <(cat "$0/img.idx") --train-labels <(gzip -c "$0/lab.idx") )" + common,
        R"(cat "$0/img.idx" | exec "$1" --train - --train-labels "$0/lab.idx" )" + common}) {
    CAPTURE(line);
    const auto r = sh(line);
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find(accuracy) != std::string::npos);
  }
  // One standard input cannot be both; labels cut short are named where they came from.
  auto r = sh("cat \"$0/img.idx\" | exec \"$1\" --train - --train-labels - " + common);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("standard input cannot hold both the IDX images and their labels") != std::string::npos);
  r = sh("head -c 100 \"$0/lab.idx\" | exec \"$1\" --train \"$0/img.idx\" --train-labels - " + common);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("standard input: truncated: the header declares 300 labels") != std::string::npos);
}

TEST_CASE("--metrics: a failed run leaves the file as it was, a resumed run appends; - puts JSON alone on stdout") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 400);
  const std::string m = dir.file("m.jsonl"), ck = dir.file("ck.bin");
  const auto lines = [&] {
    const std::string t = test::read_text(m);
    return std::count(t.begin(), t.end(), '\n');
  };
  auto r = test::run_train({"--train", train, "--epochs", "2", "-q", "--metrics", m, "--checkpoint", ck});
  REQUIRE(r.exit_code == 0);
  REQUIRE(lines() == 2);
  // A refused resume (another model) fails after the data loaded: the lines stay.
  r = test::run_train({"--train", train, "--epochs", "4", "--model", "hinge", "--metrics", m,
                       "--resume", ck});
  CHECK(r.exit_code == 2);
  CHECK(lines() == 2);
  // The resumed run keeps the lines of the run it continues and adds its own.
  r = test::run_train({"--train", train, "--epochs", "4", "-q", "--metrics", m, "--resume", ck,
                       "--checkpoint", ck});
  CHECK(r.exit_code == 0);
  CHECK(lines() == 4);
  // A fresh run starts the file anew.
  r = test::run_train({"--train", train, "--epochs", "1", "-q", "--metrics", m});
  CHECK(r.exit_code == 0);
  CHECK(lines() == 1);
  // - : the JSON lines (or the summary) alone on standard output, the rest on stderr.
  for (const std::string option : {"--metrics", "--summary"}) {
    CAPTURE(option);
    r = test::run({"/bin/sh", "-c", "exec \"$0\" --train \"$1\" --epochs 3 \"$2\" - 2>/dev/null",
                   test::hogwild_train_path(), train, option});
    CHECK(r.exit_code == 0);
    std::istringstream in(r.out);
    int objects = 0;
    if (option == "--summary") {
      CHECK(nlohmann::json::parse(r.out)["epochs"] == 3);
    } else {
      for (std::string line; std::getline(in, line); ++objects)
        CHECK(nlohmann::json::parse(line).contains("epoch"));
      CHECK(objects == 3);
    }
  }
  // --metrics /dev/stdout into a log: the lines follow what the log held (it was
  // opened "w", which truncated the log and wrote over it).
  const std::string log = dir.file("log.txt");
  r = test::run({"/bin/sh", "-c",
                 "echo before > \"$2\"; exec \"$0\" --train \"$1\" --epochs 2 --metrics /dev/stdout >> \"$2\" 2>/dev/null",
                 test::hogwild_train_path(), train, log});
  CHECK(r.exit_code == 0);
  {
    std::istringstream in(test::read_text(log));
    std::string first, line;
    std::getline(in, first);
    CHECK(first == "before");
    int objects = 0;
    for (; std::getline(in, line); ++objects) CHECK(nlohmann::json::parse(line).contains("epoch"));
    CHECK(objects == 2);
  }
  r = test::run_train({"--train", train, "--metrics", "-", "--summary", "-"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("would mix on standard output") != std::string::npos);
}

TEST_CASE("two runs given one output: the second is refused at its start, naming the first; a killed run frees it") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 20000);
  const std::string ck = dir.file("ck.bin");
  std::filesystem::create_directory(dir.file("sub"));
  for (const bool kill_it : {false, true}) {
    CAPTURE(kill_it);
    auto first = test::start_train({"--train", train, "--epochs", "100000", "--workers", "2",
                                    "--checkpoint", ck, "-q"},
                                   dir);
    REQUIRE(test::wait_for_workers(first.pid, 2).size() == 2);
    // The same file by another name, as a checkpoint or as a summary.
    for (const auto& [option, path] : {std::pair{"--checkpoint", dir.file("sub/../ck.bin")},
                                       std::pair{"--summary", ck}}) {
      const auto r = test::run_train({"--train", train, "--epochs", "1", option, path});
      INFO(r.out);
      CHECK(r.exit_code == 2);
      CHECK(r.out.find(std::string(option) + " " + path + ": another run (pid " +
                       std::to_string(first.pid) + ") writes it now") != std::string::npos);
    }
    // A run told to wait (--output-wait, as hogwild_sweep's runs are) says so, and
    // starts once the first run and its workers (the claim is theirs too) are gone.
    auto waiting = test::start_train({"--train", train, "--epochs", "1", "-q", "--checkpoint", ck,
                                      "--output-wait", "60"},
                                     dir, "waiting.txt");
    CHECK(test::wait_for_text(dir.file("waiting.txt"), "waiting up to 60 s for it to end", 30));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(!test::gone(waiting.pid));  // still waiting
    kill(first.pid, kill_it ? SIGKILL : SIGINT);
    test::wait_exit(first.pid, 60);
    const int waited_exit = test::wait_exit(waiting.pid, 60);
    INFO(test::read_text(dir.file("waiting.txt")));
    CHECK(waited_exit == 0);
    CHECK(std::filesystem::exists(ck));
  }
  // Without a wait, a busy output is refused at once; with a short one, after it.
  auto first = test::start_train({"--train", train, "--epochs", "100000", "--summary", ck, "-q"}, dir);
  REQUIRE(test::wait_for_workers(first.pid, 1).size() == 1);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = test::run_train({"--train", train, "--epochs", "1", "--summary", ck, "--output-wait", "0.5"});
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("writes it now; give this run another path") != std::string::npos);
  CHECK(waited >= 0.5);
  kill(first.pid, SIGKILL);
  test::wait_exit(first.pid, 60);
}

TEST_CASE("a malformed data file exits 2 naming file:line and what was expected") {
  test::TempDir dir;
  test::write_text(dir.file("bad.svm"), "1 1:0.5 3:1\n0 2:0.25\n1 4:x\n");
  test::write_text(dir.file("m.jsonl"), "{\"a previous run's\": 1}\n");
  auto r = run({test::hogwild_train_path(), "--train", dir.file("bad.svm"), "--metrics", dir.file("m.jsonl")});
  INFO(r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("bad.svm:3:") != std::string::npos);
  // The metrics file is emptied only once the data has loaded: the previous run's stay.
  CHECK(test::read_text(dir.file("m.jsonl")) == "{\"a previous run's\": 1}\n");
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("--worker-start fork-server: the fork server's workers train as forked ones, and it leaves with the run") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 4000);
  const auto before = test::our_shm_entries();
  std::string line[2];
  for (int served = 0; served < 2; ++served) {
    auto r = run({test::hogwild_train_path(), "--train", train, "--test", test_file, "--workers",
                  "1", "--epochs", "3", "--worker-start", served ? "fork-server" : "fork"});
    INFO(r.out);
    CHECK(r.exit_code == 0);
    const auto at = r.out.find("test accuracy");
    REQUIRE(at != std::string::npos);
    line[served] = r.out.substr(at, r.out.find(", peak memory", at) - at);
  }
  CHECK(line[1] == line[0]);  // one worker: the same accuracy and loss to the last digit
  CHECK(test::our_shm_entries() == before);
}

TEST_CASE("--mode ddp, over shm and over gloo, and --mode dp train and print the same kind of result") {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 4000);
  const auto before = test::our_shm_entries();
  std::vector<std::vector<std::string>> runs{{"--mode", "ddp"}, {"--mode", "dp"}};
  if (hogwild::gloo_built()) runs.push_back({"--mode", "ddp", "--comm", "gloo"});
  std::vector<std::string> results;
  for (const auto& extra : runs) {
    auto r = test::run_train({"--train", train, "--test", test_file, "--workers", "2", "--batch",
                              "4", "--epochs", "3", "--lr", "1"},
                             extra);
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("epoch   3/3") != std::string::npos);
    const auto at = r.out.find("test accuracy ");
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(r.out.substr(at + 14)) > 0.7);
    results.push_back(r.out.substr(at, r.out.find(", peak memory", at) - at));
  }
  if (results.size() == 3) CHECK(results[2] == results[0]);  // gloo sums as shm does
  CHECK(test::our_shm_entries() == before);
}

TEST_CASE("options a run ignores are warned about (serial's --workers, another model's --rank and --hidden); dp counts its threads") {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 400);
  auto r = test::run_train({"--train", train, "--mode", "serial", "--workers", "3", "--epochs", "1",
                            "--summary", dir.file("serial.json")});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("warning: --mode serial trains with one worker; --workers 3 is ignored") !=
        std::string::npos);
  CHECK(r.out.find("mode serial, optimizer sgd, 1 worker(s)") != std::string::npos);
  CHECK(nlohmann::json::parse(test::read_text(dir.file("serial.json")))["workers"] == 1);
  r = test::run_train({"--train", train, "--mode", "dp", "--workers", "2", "--batch", "8",
                       "--epochs", "1", "--summary", dir.file("dp.json")});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("warning") == std::string::npos);
  CHECK(r.out.find("mode dp, optimizer sgd, 2 worker(s)") != std::string::npos);
  CHECK(nlohmann::json::parse(test::read_text(dir.file("dp.json")))["workers"] == 2);
  // More dp threads than cores: said, and run (TBB ran as many as the cores, printed
  // its own warning, and the summary said the number asked).
  const unsigned many = std::max(8u, 2 * std::thread::hardware_concurrency());
  r = test::run_train({"--train", train, "--mode", "dp", "--workers", std::to_string(many),
                       "--batch", "64", "--epochs", "1", "--summary", dir.file("dp.json")});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(fmt::format("warning: {} dp threads on {} cores; they will share cores", many,
                               std::thread::hardware_concurrency())) != std::string::npos);
  CHECK(r.out.find("TBB Warning") == std::string::npos);
  CHECK(nlohmann::json::parse(test::read_text(dir.file("dp.json")))["workers"] == many);
  r = test::run_train({"--train", train, "--mode", "serial", "--epochs", "1"});  // not asked: no warning
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("warning") == std::string::npos);
  // A model's own option given to another model is said, and the run goes on.
  r = test::run_train({"--train", train, "--epochs", "1", "--rank", "5", "--hidden", "8"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("warning: --rank applies to --model mf only; --model logistic ignores it") !=
        std::string::npos);
  CHECK(r.out.find("warning: --hidden applies to --model mlp only; --model logistic ignores it") !=
        std::string::npos);
  r = test::run_train({"--train", train, "--epochs", "1", "--model", "mlp", "--hidden", "8"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("warning") == std::string::npos);
}

TEST_CASE("the summary's options repeat the run: the same command line, the same weights") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 600);
  const auto first = run({test::hogwild_train_path(), "--train", train, "--test", test_file,
                          "--mode", "serial", "--epochs", "2", "--lr", "0.25", "--batch", "4",
                          "--seed", "7", "--no-bias", "--lr-decay", "0.9", "-q", "--summary",
                          dir.file("a.json")});
  REQUIRE(first.exit_code == 0);
  const auto a = nlohmann::json::parse(test::read_text(dir.file("a.json")));
  CHECK(a["options"]["lr"] == "0.25");
  CHECK(a["options"]["no_bias"] == "true");
  CHECK(a["options"]["lr_decay"] == "0.9");
  CHECK(a["options"]["sync_every"] == "");
  std::vector<std::string> again{test::hogwild_train_path(), "--train", train, "--test", test_file,
                                 "-q", "--summary", dir.file("b.json")};
  for (const auto& [key, value] : a["options"].items()) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string text = value.get<std::string>();
    if (text.empty() || text == "false") continue;  // not given, or a flag left off
    again.push_back("--" + name);
    if (text != "true") again.push_back(text);
  }
  const auto second = run(again);
  INFO(second.out);
  REQUIRE(second.exit_code == 0);
  const auto b = nlohmann::json::parse(test::read_text(dir.file("b.json")));
  CHECK(b["options"] == a["options"]);
  CHECK(b["train_loss"] == a["train_loss"]);
  CHECK(b["test_loss"] == a["test_loss"]);
}

TEST_CASE("--config FILE: a run written down in TOML, the command line winning; --help ends with the exit statuses") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 600);
  test::write_text(dir.file("run.toml"), "# a run written down\nmode = \"atomic\"\nworkers = 2\n"
                                         "epochs = 3\nlr = 0.25\nno-bias = true\n");
  const auto r = run({test::hogwild_train_path(), "--train", train, "--config", dir.file("run.toml"),
                      "--epochs", "1", "-q", "--summary", dir.file("s.json")});
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const auto s = nlohmann::json::parse(test::read_text(dir.file("s.json")));
  CHECK(s["options"]["mode"] == "atomic");
  CHECK(s["options"]["workers"] == "2");
  CHECK(s["options"]["epochs"] == "1");  // the command line's
  CHECK(s["options"]["lr"] == "0.25");
  CHECK(s["options"]["no_bias"] == "true");
  const auto help = run({test::hogwild_train_path(), "--help"});
  CHECK(help.out.find("Exit status: 0 done;") != std::string::npos);
  CHECK(help.out.find("Example: hogwild_train --train") != std::string::npos);
}

TEST_CASE("a normal run prints progress, writes metrics and summary, leaves nothing behind") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 4000);
  const auto before = test::our_shm_entries();
  auto r = run({test::hogwild_train_path(), "--train", train, "--test", test_file, "--workers", "2",
                "--epochs", "3", "--optimizer", "adagrad", "--metrics", dir.file("m.jsonl"),
                "--summary", dir.file("s.json")});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("epoch   1/3") != std::string::npos);
  CHECK(r.out.find("epoch   3/3") != std::string::npos);
  CHECK(r.out.find("test accuracy") != std::string::npos);
  auto summary = test::read_text(dir.file("s.json"));
  CHECK(summary.find("\"mode\": \"hogwild\"") != std::string::npos);
  CHECK(summary.find("\"workers\": 2") != std::string::npos);
  CHECK(summary.find("\"optimizer\": \"adagrad\"") != std::string::npos);
  auto metrics = test::read_text(dir.file("m.jsonl"));
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 3);
  // The line's rate is each epoch's own (the first epoch's is the run's so far), and
  // its time column is labelled.
  CHECK(r.out.find(" time ") != std::string::npos);
  std::istringstream lines(metrics);
  bool first = true;
  for (std::string line; std::getline(lines, line); first = false) {
    const auto m = nlohmann::json::parse(line);
    CHECK(m["recent_samples_per_second"].get<double>() > 0);
    if (first)
      CHECK(m["recent_samples_per_second"].get<double>() ==
            doctest::Approx(m["samples_per_second"].get<double>()));
  }
  CHECK(test::our_shm_entries() == before);
}

TEST_CASE("--storage: the load line says how rows are stored; --hot-k keeps them sparse") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 400, 40);  // 20 non-zeros of 40: density 0.5
  auto load_lines = [&, &train = train, &test_file = test_file](const std::vector<std::string>& extra) {
    auto r = test::run_train(
        {"--train", train, "--test", test_file, "--workers", "2", "--epochs", "1"}, extra);
    INFO(r.out);
    CHECK(r.exit_code == 0);
    return r.out.substr(0, r.out.find("model "));
  };
  const std::string dense = load_lines({});
  CHECK_MESSAGE(dense.find("stored dense (density 0.5)") != std::string::npos, dense);
  CHECK_MESSAGE(dense.find("stored dense as the training set") != std::string::npos, dense);
  const std::string sparse = load_lines({"--storage", "sparse"});
  CHECK_MESSAGE(sparse.find("stored sparse (density 0.5)") != std::string::npos, sparse);
  const std::string hot = load_lines({"--hot-k", "8"});
  CHECK_MESSAGE(hot.find("stored sparse, kept for --hot-k (density 0.5)") != std::string::npos, hot);
  CHECK_MESSAGE(hot.find("stored sparse as the training set") != std::string::npos, hot);
}

TEST_CASE("--merge-every auto runs replicas and reports the merges") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 4000);
  auto r = run({test::hogwild_train_path(), "--train", train, "--test", test_file, "--workers", "2",
                "--epochs", "2", "--merge-every", "auto", "--summary", dir.file("s.json")});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(" merges, every ") != std::string::npos);
  auto summary = test::read_text(dir.file("s.json"));
  CHECK(summary.find("\"merge_every\": \"auto\"") != std::string::npos);
  CHECK(summary.find("\"merges\": 0,") == std::string::npos);
  r = run({test::hogwild_train_path(), "--train", train, "--merge-every", "sometimes"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--merge-every") != std::string::npos);
}

TEST_CASE("with --max-restarts 0 a SIGKILLed worker ends the run with exit 3 naming it, and no segment is left") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 20000);
  for (const char* mode : {"hogwild", "lock"}) {
    INFO(mode);
    const auto before = test::our_shm_entries();
    auto args = long_run(train, test_file, mode);
    args.insert(args.end(), {"--max-restarts", "0"});
    auto bg = test::start_train(args, dir);
    auto workers = wait_for_workers(bg.pid, 2);
    REQUIRE(workers.size() == 2);
    // In lock mode the victim very likely holds the lock: the others must not hang.
    kill(workers[1], SIGKILL);
    const int code = wait_exit(bg.pid, 30);
    auto out = test::read_text(bg.out_path);
    INFO(out);
    CHECK(code == 3);
    CHECK(out.find("was killed by signal 9") != std::string::npos);
    CHECK(children_of(bg.pid).empty());
    CHECK(test::our_shm_entries() == before);
  }
}

TEST_CASE("SIGINT and SIGTERM stop the run: exit 130/143, workers gone, no segment left") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 20000);
  for (int sig : {SIGINT, SIGTERM}) {
    const auto before = test::our_shm_entries();
    auto bg = test::start_train(long_run(train, test_file, "hogwild"), dir);
    auto workers = wait_for_workers(bg.pid, 2);
    REQUIRE(workers.size() == 2);
    kill(bg.pid, sig);
    const int code = wait_exit(bg.pid, 30);
    CHECK(code == (sig == SIGINT ? 130 : 143));
    for (pid_t w : workers) CHECK((kill(w, 0) != 0 || waitpid(w, nullptr, WNOHANG) != 0));
    CHECK(test::our_shm_entries() == before);
  }
}

TEST_CASE("killing the parent takes the workers with it") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 20000);
  auto bg = test::start_train(long_run(train, test_file, "hogwild"), dir);
  auto workers = wait_for_workers(bg.pid, 2);
  REQUIRE(workers.size() == 2);
  kill(bg.pid, SIGKILL);
  CHECK(wait_exit(bg.pid, 10) == -SIGKILL);
  for (pid_t w : workers) CHECK(test::all_gone_within({w}, 1.0));
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("killing the parent of a fork-server run takes the server and its workers with it") {
  test::TempDir dir;
  auto [train, test_file] = problem_files(dir, 20000);
  auto args = long_run(train, test_file, "hogwild");
  args.insert(args.end(), {"--worker-start", "fork-server"});
  auto bg = test::start_train(args, dir);
  const auto server = wait_for_workers(bg.pid, 1);  // the parent's only child
  REQUIRE(server.size() == 1);
  auto workers = wait_for_workers(server[0], 2);
  REQUIRE(workers.size() == 2);
  kill(bg.pid, SIGKILL);
  CHECK(wait_exit(bg.pid, 10) == -SIGKILL);
  workers.push_back(server[0]);
  for (pid_t p : workers) CHECK(test::all_gone_within({p}, 1.0));
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("SpamAssassin end to end: 2 hogwild workers reach 0.96 test accuracy" * doctest::test_suite("shared_data")) {
  auto data = test::shared_data();
  if (!data) return;
  const auto sa = *data / "spamassassin";
  auto r = run({test::hogwild_train_path(), "--train", (sa / "spam.train.svm.gz").string(), "--test",
                (sa / "spam.test.svm.gz").string(), "--workers", "2", "--epochs", "10", "--lr", "1",
                "--lr-decay", "0.8"});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  auto pos = r.out.find("test accuracy ");
  REQUIRE(pos != std::string::npos);
  CHECK(std::stod(r.out.substr(pos + 14)) >= 0.96);
}
