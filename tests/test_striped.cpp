// --mode striped (src/modes/striped/): a lock per stripe of features. One stripe lets
// one worker at a time into a step, as lock mode does; batches on different stripes
// run together; a dense row holds every stripe. It trains as lock and hogwild do,
// and its option is declared by the mode alone.
#include <doctest/doctest.h>

#include <sys/mman.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "crowd.hpp"
#include "hogwild/arena.hpp"
#include "hogwild/error.hpp"
#include "hogwild/trainer.hpp"
#include "modes/mode_def.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

const Mode kStriped = parse_mode("striped");

// Rows of one feature each, feature r mod 2 (sparse), or both features (dense).
Dataset two_features(bool dense, std::size_t rows) {
  std::vector<float> labels(rows, 0.0f);
  if (dense) return Dataset::dense(labels, std::vector<float>(2 * rows, 1.0f), 2, "dense");
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> index;
  for (std::size_t r = 0; r < rows; ++r) {
    index.push_back(static_cast<std::uint32_t>(r % 2));
    offsets.push_back(index.size());
  }
  return Dataset::sparse(labels, offsets, index, std::vector<float>(rows, 1.0f), 2, "sparse");
}

// The most workers inside a step at once, 2 workers, `stripes` stripes.
int most_inside(const Dataset& d, std::int64_t stripes) {
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(page != MAP_FAILED);
  auto* o = new (page) test::Occupancy();
  test::Crowd model(o);
  TrainConfig c;
  c.mode = kStriped;
  c.mode_options["stripes"] = stripes;
  c.workers = 2;
  c.epochs = 2;
  const auto r = train(c, model, d, nullptr);
  CHECK(r.samples == 2 * d.rows());
  const int most = o->most.load();
  munmap(page, 4096);
  return most;
}

}  // namespace

TEST_CASE("one stripe lets one worker at a time into a step; two let batches on different "
          "stripes in together; a dense row holds every stripe") {
  const Dataset sparse = two_features(false, 4000), dense = two_features(true, 4000);
  const int one = most_inside(sparse, 1), two = most_inside(sparse, 2),
            dense_two = most_inside(dense, 2);
  MESSAGE("at most inside a step, 2 workers: 1 stripe " << one << ", 2 stripes " << two
                                                         << ", dense rows on 2 stripes "
                                                         << dense_two);
  CHECK(one == 1);
  CHECK(two == 2);  // rows of feature 0 and of feature 1 at once
  CHECK(dense_two == 1);
}

TEST_CASE("a mini-batch holds the stripes of every one of its rows") {
  // Row 0: features 0, 4, 8, 12 (all in stripe 0 of 4); row 1: feature 1 (stripe 1).
  const std::vector<float> labels{0, 0};
  const std::vector<std::uint64_t> offsets{0, 4, 5};
  const std::vector<std::uint32_t> index{0, 4, 8, 12, 1};
  const Dataset d = Dataset::sparse(labels, offsets, index, std::vector<float>(5, 1.0f), 13, "t");
  const std::vector<float> targets{0, 0};
  const std::uint32_t both[] = {0, 1}, second[] = {1};
  TrainConfig c;
  c.mode = kStriped;
  c.mode_options["stripes"] = 4;
  const auto& mode = detail::mode_def(kStriped);
  std::vector<BlockSpec> blocks{{"flag", 64}};
  const detail::ModeArena plan{c, {}, 2};
  mode.arena_blocks(plan, blocks);
  Arena arena = Arena::create(blocks);
  mode.init_blocks(plan, arena);
  auto* in = new (arena.block("flag").data()) std::atomic<int>(0);
  const ParamSet none;
  auto part = mode.make_part({c, 0, none, arena});
  REQUIRE(part);
  part->enter_step(Batch{&d, targets.data(), both, 2});  // stripes 0 and 1
  const pid_t child = fork();
  if (child == 0) {  // a batch of row 1 alone: stripe 1, held by the parent
    auto mine = mode.make_part({c, 1, none, arena});
    mine->enter_step(Batch{&d, targets.data(), second, 1});
    in->store(1);
    mine->leave_step();
    _exit(0);
  }
  usleep(200000);
  CHECK(in->load() == 0);  // still waiting for stripe 1
  part->leave_step();
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(in->load() == 1);
}

TEST_CASE("striped trains as lock and hogwild do, with one stripe and with many") {
  auto [train_set, test_set] = test::generated_problem(40000, 10000, 2000, 20, 0.0, 3);
  TrainConfig c;
  c.workers = 2;
  c.epochs = 15;
  c.step_size.lr0 = 0.5f;
  c.step_size.decay = 0.8f;
  c.seed = 42;
  c.mode = Mode::serial;
  const auto serial = train(c, train_set, &test_set);
  c.mode = kStriped;
  for (std::int64_t k : {1, 64}) {
    c.mode_options["stripes"] = k;
    const auto r = train(c, train_set, &test_set);
    MESSAGE("striped, " << k << " stripe(s), 2 workers: accuracy " << r.test.accuracy
                        << " (serial " << serial.test.accuracy << ")");
    CHECK(std::abs(r.test.accuracy - serial.test.accuracy) <= 0.005);
    CHECK(r.samples == 15ull * train_set.rows());
  }
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("--stripes is striped's: declared by the mode, checked, and in the summary" *
          doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  const auto [train_file, test_file] = test::problem_files(dir, 2000);
  const std::vector<std::string> base = {test::hogwild_train_path(), "--train", train_file,
                                         "--test", test_file, "--epochs", "2", "--workers", "2"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return test::run(a);
  };
  const auto elsewhere = with({"--stripes", "8"});  // the default mode, hogwild
  CHECK(elsewhere.exit_code == 2);
  CHECK(elsewhere.out.find("--stripes applies to --mode striped") != std::string::npos);
  const auto zero = with({"--mode", "striped", "--stripes", "0"});
  CHECK(zero.exit_code == 2);
  CHECK(zero.out.find("--stripes 0 is out of range (1 to 1024)") != std::string::npos);
  const auto hot = with({"--mode", "striped", "--hot-k", "16"});
  CHECK(hot.exit_code == 2);
  CHECK(hot.out.find("--hot-k does not apply to --mode striped") != std::string::npos);
  const auto help = test::run({test::hogwild_train_path(), "--help"});
  CHECK(help.out.find("--stripes") != std::string::npos);
  for (const auto& [given, expected] :
       std::vector<std::pair<std::vector<std::string>, int>>{{{}, 64}, {{"--stripes", "16"}, 16}}) {
    std::vector<std::string> more = {"--mode", "striped", "--summary", dir.file("s.json")};
    more.insert(more.end(), given.begin(), given.end());
    const auto r = with(more);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const auto s = nlohmann::json::parse(test::read_text(dir.file("s.json")));
    CHECK(s.at("mode") == "striped");
    CHECK(s.at("mode_options").at("stripes") == expected);
    CHECK(s.at("test_accuracy").get<double>() > 0.6);
  }
}
