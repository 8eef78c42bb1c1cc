// The fork server as a program of its own (start_fork_server(program), what the
// Python module does at import): its workers train as forked ones do; a program
// that registered a model of its own, or whose server program cannot run, gets a
// copy of itself as its server; the server program ends with the program; run by
// hand it says what it is. Each case runs in a fresh process (a process starts one
// server, once).
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <string>
#include <thread>

#include "hogwild/fork_server.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

std::string server_program() {
  const char* p = std::getenv("HOGWILD_FORK_SERVER_PROGRAM");
  return p ? p : "";
}

// A model of the program's own: logistic regression under another name.
struct LogisticToo : LinearModel {
  explicit LogisticToo(const ModelOptions& o) : LinearModel(LinearLoss::logistic, o) {}
  std::string name() const override { return "logistic_too"; }
};

std::string exe_of(pid_t pid) {
  return std::filesystem::read_symlink(fmt::format("/proc/{}/exe", pid)).string();
}

// Starts the server from args[0]; args[1] is what it must be ("program": that
// program; "copy": this one); args[2] "register" registers a model of its own first
// and trains that. Exit 0 when the server is what was expected and the worker it
// started trained bit for bit as a forked one.
const test::ChildEntry served_entry("served", [](const std::vector<std::string>& args) {
  const bool own_model = args.at(2) == "register";
  if (own_model)
    register_model("logistic_too", [](const ModelOptions& o) { return std::make_unique<LogisticToo>(o); });
  start_fork_server(args.at(0));
  const std::string server = exe_of(fork_server_pid());
  const std::string expected = args.at(1) == "program"
                                   ? std::filesystem::canonical(args.at(0)).string()
                                   : exe_of(getpid());
  if (server != expected) {
    std::fprintf(stderr, "the fork server runs %s, not %s\n", server.c_str(), expected.c_str());
    return 10;
  }
  const auto [tr, te] = test::generated_problem(3000, 300, 200, 8, 0.02, 5);
  TrainConfig c;
  c.model = own_model ? "logistic_too" : "logistic";
  c.mode = Mode::hogwild;
  c.workers = 1;
  c.epochs = 2;
  c.step_size.lr0 = 0.1f;
  c.worker_start = WorkerStart::fork_server;
  const auto served = train(c, tr, &te);
  c.worker_start = WorkerStart::fork;
  const auto forked = train(c, tr, &te);
  if (served.parameters != forked.parameters) {
    std::fprintf(stderr, "the served worker's weights differ from the forked one's\n");
    return 11;
  }
  return 0;
});

// Starts the server program args[0], writes its pid to args[1], and waits to be killed.
const test::ChildEntry hold_entry("hold", [](const std::vector<std::string>& args) {
  start_fork_server(args.at(0));
  test::write_text(args.at(1) + ".tmp", std::to_string(fork_server_pid()));
  std::filesystem::rename(args.at(1) + ".tmp", args.at(1));
  std::this_thread::sleep_for(std::chrono::seconds(120));
  return 0;
});

}  // namespace

TEST_CASE("a fork server that is a program of its own starts workers that train as forked ones") {
  REQUIRE_FALSE(server_program().empty());
  const pid_t child = test::spawn_child("served", {server_program(), "program", "plain"});
  CHECK(test::wait_exit(child, 120) == 0);
}

TEST_CASE("a program that registered a model of its own gets a copy of itself as its server") {
  const pid_t child = test::spawn_child("served", {server_program(), "copy", "register"});
  CHECK(test::wait_exit(child, 120) == 0);
}

TEST_CASE("a server program that cannot run leaves a copy of the program as its server") {
  test::TempDir dir;
  test::write_text(dir.file("not-executable"), "#!/bin/sh\n");
  // Missing, not executable (the exec fails: the child serves), or a program that
  // runs but never serves (the program waits for its word, then makes a copy).
  for (const std::string& program : {dir.file("missing"), dir.file("not-executable"),
                                     std::string("/bin/true")}) {
    CAPTURE(program);
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t child = test::spawn_child("served", {program, "copy", "plain"});
    CHECK(test::wait_exit(child, 120) == 0);
    // Its end is seen at once: no wait for the 10 s the program has to say it runs.
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(8));
  }
}

TEST_CASE("the server program ends with the program that started it") {
  test::TempDir dir;
  const std::string pid_file = dir.file("server.pid");
  const pid_t child = test::spawn_child("hold", {server_program(), pid_file});
  for (int i = 0; i < 300 && !std::filesystem::exists(pid_file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(std::filesystem::exists(pid_file));
  const pid_t server = std::stoi(test::read_text(pid_file));
  CHECK(exe_of(server) == std::filesystem::canonical(server_program()).string());
  kill(child, SIGKILL);
  CHECK(test::wait_exit(child, 30) == -SIGKILL);
  CHECK(test::all_gone_within({server}, 10));
}

TEST_CASE("the server program run by hand says what it is and exits 2") {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{server_program()},
        {server_program(), "--socket", "99", "--program", "1"},  // no such descriptor
        {server_program(), "--socket", "x", "--program", "1"},
        {server_program(), "--socket", "", "--program", "1"}}) {
    const auto r = test::run(argv, 30);
    INFO(r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("not by hand") != std::string::npos);
  }
}
