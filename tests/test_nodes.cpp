// Several machines, stood for by network namespaces (hosts.hpp): hogwild_train on
// two hosts with their own addresses, loopback, /dev/shm and hostname, meeting
// through a file: rendezvous on the file system they share. Each case is what a
// user of two real machines would see: a late node, a node with other options, a
// node that fails, cloned hosts with one hostname, no --iface.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "comm/gloo.hpp"
#include "comm/interfaces.hpp"
#include "hosts.hpp"
#include "support.hpp"

using namespace hogwild;
namespace test = hogwild::test;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Two hosts, or a skip (77) saying why not.
std::unique_ptr<test::Hosts> two_hosts(const std::vector<std::string>& names = {"node0", "node1"}) {
  if (!gloo_built()) {
    test::skip("built without Gloo");
    return nullptr;
  }
  std::string why;
  auto hosts = test::Hosts::make(names, &why);
  if (!hosts) test::skip(why);
  return hosts;
}

// A job's files: a folder with the rendezvous directory the nodes share ("rdv")
// and a generated problem of `rows` rows and `features` features.
struct Job {
  Job(std::size_t rows, std::size_t features) {
    std::filesystem::create_directory(dir.file("rdv"));
    std::tie(train, test_file) = test::problem_files(dir, rows, features);
  }
  test::TempDir dir;
  std::string train, test_file;
};

struct Node {
  explicit Node(test::Background started) : b(std::move(started)) {}
  test::Background b;
  Clock::time_point t0 = Clock::now();
  int code = -1;
  double seconds = 0;
  std::string out;
  void wait(double limit = 120) {
    code = test::wait_exit(b.pid, limit);
    seconds = seconds_since(t0);
    out = test::read_text(b.out_path);
  }
};

// hogwild_train on host k as node k of two: ddp, 2 workers; `extra`: option-value pairs.
Node start_node(const test::Hosts& hosts, std::size_t k, const test::TempDir& dir,
                const std::string& train, const std::string& test_file,
                std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{test::hogwild_train_path(), "--train", train, "--test", test_file,
                                "--mode", "ddp", "--workers", "2", "--epochs", "3", "--batch", "32",
                                "--nodes", "2", "--node-rank", std::to_string(k),
                                "--rendezvous", "file:" + dir.file("rdv"), "--comm-timeout", "5",
                                "--summary", dir.file(fmt::format("s{}.json", k))};
  // An option of `extra` that argv has replaces its value there (the CLI takes each once).
  for (std::size_t i = 0; i + 1 < extra.size(); i += 2) {
    const auto at = std::find(argv.begin(), argv.end(), extra[i]);
    if (at != argv.end()) {
      *(at + 1) = extra[i + 1];
    } else {
      argv.push_back(extra[i]);
      argv.push_back(extra[i + 1]);
    }
  }
  return Node(hosts.start(k, argv, dir, fmt::format("node{}.txt", k)));
}

nlohmann::json summary(const test::TempDir& dir, int k) {
  return nlohmann::json::parse(test::read_text(dir.file(fmt::format("s{}.json", k))));
}

}  // namespace

TEST_CASE("interfaces: the one on a network with every other machine") {
  using detail::InterfaceAddress;
  const auto mine = detail::parse_addresses("eth0 192.168.1.5/24;eth1 10.77.3.1/16");
  REQUIRE(mine.size() == 2);
  CHECK(mine[1] == InterfaceAddress{"eth1", (10u << 24) | (77u << 16) | (3u << 8) | 1u, 16});
  CHECK(detail::format_addresses(mine) == "eth0 192.168.1.5/24;eth1 10.77.3.1/16");
  CHECK(detail::interface_toward(mine, {detail::parse_addresses("ib0 10.77.200.9/16")}) == "eth1");
  CHECK(detail::interface_toward(mine, {detail::parse_addresses("e 192.168.1.77/24"),
                                        detail::parse_addresses("e 10.77.0.2/16")}) == "");
  CHECK(detail::interface_toward(mine, {detail::parse_addresses("e 172.16.0.1/12")}) == "");
  CHECK(detail::parse_addresses("x;eth0 300.1.1.1/24;eth0 1.2.3.4/33;eth0 1.2.3.4/8").size() == 1);
}

TEST_CASE("two hosts, with their own hostnames or cloned with one: ddp without --iface talks over "
          "the interface that reaches the other host, never loopback, to the same weights on "
          "both; the keys are erased") {
  for (const auto& [names, rows, features] :
       {std::tuple{std::vector<std::string>{"node0", "node1"}, 3000, 300},
        std::tuple{std::vector<std::string>{"clone", "clone"}, 2000, 200}}) {
    const std::string second = names[1];  // (clang 14 captures no structured binding)
    CAPTURE(second);
    auto hosts = two_hosts(names);
    if (!hosts) return;
    Job job(rows, features);
    const auto& [dir, train, test_file] = job;
    Node a = start_node(*hosts, 0, dir, train, test_file);
    Node b = start_node(*hosts, 1, dir, train, test_file);
    a.wait();
    b.wait();
    INFO(a.out << "\n---\n" << b.out);
    REQUIRE(a.code == 0);
    REQUIRE(b.code == 0);
    const auto s0 = summary(dir, 0), s1 = summary(dir, 1);
    CHECK(s0["iface"] == hosts->iface(0));
    CHECK(s1["iface"] == hosts->iface(1));
    // The same weights: the same test loss, to the last bit of a double.
    CHECK(s0["test_loss"].get<double>() == s1["test_loss"].get<double>());
    CHECK(test::entries_in(dir.file("rdv")) == 0);
  }
}

TEST_CASE("two hosts: a node started late joins; the wait is not training time") {
  auto hosts = two_hosts();
  if (!hosts) return;
  Job job(2000, 200);
  const auto& [dir, train, test_file] = job;
  // Later than --comm-timeout (5 s): the join waits --join-timeout (default 300 s).
  Node a = start_node(*hosts, 0, dir, train, test_file);
  std::this_thread::sleep_for(std::chrono::seconds(7));
  CHECK(!test::gone(a.b.pid));
  Node b = start_node(*hosts, 1, dir, train, test_file);
  a.wait();
  b.wait();
  INFO(a.out << "\n---\n" << b.out);
  REQUIRE(a.code == 0);
  REQUIRE(b.code == 0);
  const auto s0 = summary(dir, 0);
  CHECK(s0["join_seconds"].get<double>() > 6);
  CHECK(s0["train_seconds"].get<double>() < a.seconds - 6);
  CHECK(s0["test_loss"].get<double>() == summary(dir, 1)["test_loss"].get<double>());
  CHECK(test::entries_in(dir.file("rdv")) == 0);
}

TEST_CASE("two hosts: a node later than --join-timeout: the first fails, naming it") {
  auto hosts = two_hosts();
  if (!hosts) return;
  Job job(1000, 100);
  const auto& [dir, train, test_file] = job;
  Node a = start_node(*hosts, 0, dir, train, test_file, {"--join-timeout", "2"});
  a.wait(60);
  INFO(a.out);
  CHECK(a.code == kExitWorkerFailed);
  CHECK(a.seconds < 2 + 4);
  CHECK(a.out.find("node(s) 1 did not join run") != std::string::npos);
  CHECK(a.out.find("within 2 s (--join-timeout)") != std::string::npos);
  CHECK(test::entries_in(dir.file("rdv")) == 0);
}

TEST_CASE("two hosts: nodes started with other options or --nodes are refused within seconds, "
          "naming the difference") {
  auto hosts = two_hosts();
  if (!hosts) return;
  Job job(1000, 100);
  const auto& [dir, train, test_file] = job;
  for (const auto& [option, value, other] :
       {std::tuple{"--nodes", "3", "--nodes=2"}, std::tuple{"--lr", "0.3", "--lr=0.1"}}) {
    const std::string given = option;  // (clang 14 captures no structured binding)
    CAPTURE(given);
    Node a = start_node(*hosts, 0, dir, train, test_file);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    Node b = start_node(*hosts, 1, dir, train, test_file, {option, value});
    a.wait(60);
    b.wait(60);
    INFO(a.out << "\n---\n" << b.out);
    CHECK(a.code == kExitBadInput);
    CHECK(b.code == kExitBadInput);
    CHECK(b.seconds < 5);
    CHECK(a.seconds < 5.5);
    CHECK(a.out.find(fmt::format("was started with {}={}", option, value)) != std::string::npos);
    CHECK(b.out.find(fmt::format("was started with {}", other)) != std::string::npos);
    CHECK(test::entries_in(dir.file("rdv")) == 0);
  }
}

TEST_CASE("two hosts: a node that fails on its configuration tells the other, which stops at once") {
  auto hosts = two_hosts();
  if (!hosts) return;
  Job job(1000, 100);
  const auto& [dir, train, test_file] = job;
  // Node 1 resumes from a checkpoint of another model: refused after it loads.
  const auto other = test::run_train({"--train", train, "--model", "hinge", "--epochs", "1",
                                      "--checkpoint", dir.file("other.ck"), "-q"});
  REQUIRE(other.exit_code == 0);
  Node a = start_node(*hosts, 0, dir, train, test_file);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Node b = start_node(*hosts, 1, dir, train, test_file, {"--resume", dir.file("other.ck")});
  b.wait(60);
  a.wait(60);
  INFO(a.out << "\n---\n" << b.out);
  CHECK(b.code == kExitBadInput);
  CHECK(a.code == kExitBadInput);
  CHECK(a.seconds < 6);
  CHECK(a.out.find("node 1 (host node1) failed: ") != std::string::npos);
  CHECK(test::entries_in(dir.file("rdv")) == 0);
}

TEST_CASE("two hosts: two nodes given one --node-rank: the second is told it is taken, the first stops too") {
  auto hosts = two_hosts();
  if (!hosts) return;
  Job job(1000, 100);
  const auto& [dir, train, test_file] = job;
  Node a = start_node(*hosts, 0, dir, train, test_file, {"--join-timeout", "10"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<std::string> argv{test::hogwild_train_path(), "--train", train, "--mode", "ddp",
                                "--workers", "2", "--nodes", "2", "--node-rank", "0",
                                "--rendezvous", "file:" + dir.file("rdv")};
  Node b(hosts->start(1, argv, dir, "b.txt"));
  b.wait(30);
  INFO(b.out);
  CHECK(b.code == kExitBadInput);
  CHECK(b.out.find("--node-rank 0: node 0 of run") != std::string::npos);
  CHECK(b.out.find("is taken by a running node (host node0") != std::string::npos);
  // The first stops too, at once: the job is misconfigured.
  a.wait(30);
  INFO(a.out);
  CHECK(a.code == kExitBadInput);
  CHECK(a.seconds < 5);
  CHECK(a.out.find("another node (host node1, pid ") != std::string::npos);
  CHECK(test::entries_in(dir.file("rdv")) == 0);
}

TEST_CASE("two hosts: a cut link ends the run on both within the timeout, naming the peer and its address") {
  auto hosts = two_hosts();
  if (!hosts) return;
  Job job(2000, 200);
  const auto& [dir, train, test_file] = job;
  const std::vector<std::string> run{"--epochs", "100000", "--comm-timeout", "3"};
  Node a = start_node(*hosts, 0, dir, train, test_file, run);
  Node b = start_node(*hosts, 1, dir, train, test_file, run);
  // Both train (a line per epoch), then the cable between them is cut.
  const auto t0 = Clock::now();
  while (test::read_text(a.b.out_path).find("/100000") == std::string::npos &&
         seconds_since(t0) < 60)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  hosts->set_link(1, false);
  const auto cut = Clock::now();
  a.wait(60);
  const double a_after = seconds_since(cut);
  b.wait(60);
  const double b_after = seconds_since(cut);
  // Without their epoch lines (hundreds), which cut the logs short.
  auto said = [](const std::string& out) {
    std::string kept, line;
    std::istringstream in(out);
    while (std::getline(in, line))
      if (!line.starts_with("epoch ")) kept += line + "\n";
    return kept;
  };
  INFO("node 0, " << a_after << " s after the cut:\n" << said(a.out) << "\n---\nnode 1, " << b_after
                  << " s after:\n" << said(b.out));
  CHECK(a.code == kExitWorkerFailed);
  CHECK(b.code == kExitWorkerFailed);
  CHECK(a_after < 3 + 4);
  CHECK(b_after < 3 + 4);
  CHECK(a.out.find(fmt::format("node 1 (host node1, {})", hosts->address(1))) != std::string::npos);
  CHECK(b.out.find(fmt::format("node 0 (host node0, {})", hosts->address(0))) != std::string::npos);
  CHECK(test::entries_in(dir.file("rdv")) == 0);
}
