// Replicated Hogwild (TrainConfig::merge_every / --merge-every): each worker trains a
// private copy and merges its change into the shared weights every F examples.
// A merge must add exactly the copy's change, leave what it did not change alone,
// and reload the copy; training with replicas must converge like serial in both
// modes that allow them.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <limits>
#include <span>
#include <thread>
#include <vector>

#include <unistd.h>

#include "hogwild/error.hpp"
#include "modes/hogwild/replica.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

TrainConfig config(Mode mode, unsigned workers, std::size_t merge_every) {
  TrainConfig c = test::sgd_config(mode, workers);
  c.merge_every = merge_every;
  return c;
}

// The convergence cases' step size: lr0 0.5 decaying by 0.7 an epoch ends its 8
// epochs at 0.04 (sgd_config's 0.8: 0.10), so that the last iterate's noise, which
// how two workers' merges interleave amplifies, stays well inside their bounds.
TrainConfig decayed(TrainConfig c) {
  c.step_size.decay = 0.7f;
  return c;
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  return worst;
}

}  // namespace

TEST_CASE("a merge adds the copy's change to what the others wrote, then reloads the copy") {
  // 37 floats: four 8-lane blocks and a scalar tail; two tensors.
  for (bool atomic : {false, true}) {
    INFO("atomic " << atomic);
    std::vector<float> w(37), b(3);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
    b = {10, 20, 30};
    const ParamSet shared({{"w", w.data(), w.size()}, {"b", b.data(), b.size()}});
    // Tensor w merges [0, 20) and [24, 37); b has no ranges (all of it).
    Replica r(shared, {{{0, 20}, {24, 37}}}, 4, atomic);
    const ParamSet& mine = r.params();
    REQUIRE(mine.count() == 2);
    CHECK(mine.data(0) != w.data());
    for (std::size_t i = 0; i < w.size(); ++i) REQUIRE(mine.data(0)[i] == w[i]);

    mine.data(0)[3] += 0.5f;    // a block with one change
    mine.data(0)[33] -= 2.0f;   // in the tail
    mine.data(0)[21] = -100.f;  // outside the ranges: never merged, overwritten on reload
    mine.data(1)[2] += 1.f;
    w[3] += 4.f;    // another worker's merged change, same coordinate
    w[12] = 99.f;   // and one on a coordinate this copy did not change
    w[21] = 7.f;    // and one outside this copy's ranges

    CHECK_FALSE(r.due(3));
    CHECK(r.due(1));
    r.merge();
    CHECK(r.merges() == 1);
    CHECK_FALSE(r.due(3));  // the count starts again
    std::vector<float> want(37);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<float>(i);
    want[3] = 3.f + 4.f + 0.5f;
    want[12] = 99.f;
    want[21] = 7.f;
    want[33] = 33.f - 2.0f;
    CHECK(w == want);
    CHECK(b == std::vector<float>{10, 20, 31});
    // The copy now reads the shared values in its ranges (the others' work included).
    for (std::size_t i = 0; i < 20; ++i) CHECK(mine.data(0)[i] == w[i]);
    for (std::size_t i = 24; i < 37; ++i) CHECK(mine.data(0)[i] == w[i]);
    CHECK(mine.data(1)[2] == 31.f);
    // Nothing changed since: a second merge writes nothing, even where others did.
    w[5] = -1.f;
    r.merge();
    CHECK(w[5] == -1.f);
    CHECK(mine.data(0)[5] == -1.f);
  }
}

TEST_CASE("a mean tensor adds its change divided by the writers; the others add all of theirs") {
  // Three replicas write these weights. The bias adds a third of the change; a
  // whole tensor and a tensor merged by ranges that are not mean tensors add all.
  std::vector<float> bias(3, 1.f), whole(300, 1.f), ranged(8, 1.f);
  const ParamSet shared({{"b", bias.data(), bias.size()},
                         {"whole", whole.data(), whole.size()},
                         {"ranged", ranged.data(), ranged.size()}});
  for (bool atomic : {false, true}) {
    INFO("atomic " << atomic);
    Replica r(shared, {{}, {}, {{0, 8}}}, 1, atomic, {{true, false, false}, 3});
    const ParamSet& mine = r.params();
    for (std::size_t t = 0; t < 3; ++t) mine.data(t)[0] += 3.f;
    mine.data(0)[2] -= 6.f;
    bias[1] += 5.f;  // another writer's merged change
    r.merge();
    CHECK(bias == std::vector<float>{2, 6, -1});
    CHECK(whole[0] == 4.f);
    CHECK(whole[1] == 1.f);
    CHECK(ranged[0] == 4.f);
    // The copy reloads what the weights now hold.
    CHECK(mine.data(0)[0] == 2.f);
    CHECK(mine.data(0)[1] == 6.f);
    CHECK(mine.data(1)[0] == 4.f);
    std::fill(bias.begin(), bias.end(), 1.f);
    std::fill(whole.begin(), whole.end(), 1.f);
    std::fill(ranged.begin(), ranged.end(), 1.f);
  }
}

TEST_CASE("a settled feature's merge adds 1 / (writers x how far a copy settles) of its change") {
  using detail::SettledShares;
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(SettledShares::share(inf, 16, 4) == 0.25f);  // settled in one step: the mean
  CHECK(SettledShares::share(0, 4096, 4) == 1.f);    // never moves: all of it
  // Half settled (rate ln 2 / F) among 4 writers: 1 / (4 x 0.5).
  CHECK(SettledShares::share(std::log(2.0) / 1000, 1000, 4) == doctest::Approx(0.5).epsilon(1e-6));
  // One writer's change is never counted twice: nothing to share.
  CHECK(SettledShares({{0, inf}}, 1, 1000).empty());
  // Kept: those whose share at the longest interval is below 1 (rate x most above
  // -log(1 - 1/W) = 0.288 for W = 4), in feature order.
  SettledShares s({{9, std::log(2.0) / 1000}, {5, 1e-6}, {2, inf}}, 4, 1000);
  REQUIRE(s.features().size() == 2);
  CHECK(s.features()[0].index == 2);
  CHECK(s.features()[1].index == 9);
  std::span<const float> at = s.at(1000);
  CHECK(at[0] == 0.25f);
  CHECK(at[1] == doctest::Approx(0.5).epsilon(1e-6));
  at = s.at(100);  // a tenth of the interval: feature 9 settles 6.7 %, 4 x that < 1
  CHECK(at[0] == 0.25f);
  CHECK(at[1] == 1.f);
}

TEST_CASE("settled features are measured on the worker's rows: a bias-like one is, a rare one is not") {
  // 100 rows: feature 0 = 1 in each, feature 3 = 0.1 in every 50th, feature 7 = 0.5
  // in every other.
  std::vector<float> labels, values;
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> indices;
  for (std::size_t r = 0; r < 100; ++r) {
    labels.push_back(static_cast<float>(r % 2));
    indices.push_back(0), values.push_back(1.f);
    if (r % 50 == 0) indices.push_back(3), values.push_back(0.1f);
    if (r % 2 == 0) indices.push_back(7), values.push_back(0.5f);
    offsets.push_back(indices.size());
  }
  const Dataset d = Dataset::sparse(labels, offsets, indices, values, 8, "rows");
  using detail::SettledShares;
  // lr 0.5, logistic's curvature 1/4: feature 0 loses 1/8 of its error a step, in
  // every row; feature 7 1/32, in half of them; feature 3 1/800, in 2 %: at 4096
  // examples 4 x (1 - (1 - 1/800)^82) = 0.39, below 1, so it keeps its whole change.
  const SettledShares s = SettledShares::measure(d, 0, 100, 4, 0.5, 0.25, 4096);
  REQUIRE(s.features().size() == 2);
  CHECK(s.features()[0].index == 0);
  CHECK(s.features()[0].rate == doctest::Approx(-std::log1p(-0.125)));
  CHECK(s.features()[1].index == 7);
  CHECK(s.features()[1].rate == doctest::Approx(-0.5 * std::log1p(-0.03125)));
  // Only rows [49, 51): feature 3 is in one of the two, and is kept (rate 0.5 /
  // 800, x 4096 = 2.6 > 0.288); feature 7 is in one of two too.
  const SettledShares two = SettledShares::measure(d, 49, 51, 4, 0.5, 0.25, 4096);
  REQUIRE(two.features().size() == 3);
  CHECK(two.features()[1].index == 3);
  CHECK(two.features()[1].rate == doctest::Approx(-0.5 * std::log1p(-0.00125)));
  CHECK(two.features()[2].rate == doctest::Approx(-0.5 * std::log1p(-0.03125)));
  // A hot window's: only the features asked for (feature 0 is not; 3 is, but
  // stays rare).
  const std::vector<std::uint32_t> hot{7, 3};
  const SettledShares window = SettledShares::measure(d, 0, 100, 4, 0.5, 0.25, 4096, hot);
  REQUIRE(window.features().size() == 1);
  CHECK(window.features()[0].index == 7);
  CHECK(window.features()[0].rate == doctest::Approx(-0.5 * std::log1p(-0.03125)));
  CHECK(SettledShares::measure(d, 49, 51, 4, 0.5, 0.25, 4096, hot).features().size() == 2);
  CHECK(SettledShares::measure(d, 0, 100, 1, 0.5, 0.25, 4096).empty());  // one writer
  CHECK(SettledShares::measure(d, 0, 0, 4, 0.5, 0.25, 4096).empty());    // no rows

  // 40,000 rows, a sample of 4,096 drawn at random: feature 7, in every other
  // row, is found in about half of them (a stride of 9 would find it in all or none).
  std::vector<float> many_labels, many_values;
  std::vector<std::uint64_t> many_offsets{0};
  std::vector<std::uint32_t> many_indices;
  for (std::size_t r = 0; r < 40000; ++r) {
    many_labels.push_back(0.f);
    many_indices.push_back(0), many_values.push_back(1.f);
    if (r % 2 == 0) many_indices.push_back(7), many_values.push_back(0.5f);
    many_offsets.push_back(many_indices.size());
  }
  const Dataset many = Dataset::sparse(many_labels, many_offsets, many_indices, many_values, 8, "many");
  const SettledShares m = SettledShares::measure(many, 0, 40000, 4, 0.5, 0.25, 4096);
  REQUIRE(m.features().size() == 2);
  CHECK(m.features()[0].rate == doctest::Approx(-std::log1p(-0.125)));
  CHECK(m.features()[1].rate == doctest::Approx(-0.5 * std::log1p(-0.03125)).epsilon(0.1));
}

TEST_CASE("a replica adds a settled feature's share of its change and the rest whole, on packed ranges") {
  // Three writers. Features 12 (in a run the vector kernel merges) and 35 (a run of
  // one, merged inline) settle in one step: a third of their change; 2 and 20 add all.
  using detail::SettledShares;
  const double inf = std::numeric_limits<double>::infinity();
  for (bool atomic : {false, true}) {
    INFO("atomic " << atomic);
    std::vector<float> w(40, 1.f), bias(1, 0.f);
    const ParamSet shared({{"w", w.data(), w.size()}, {"b", bias.data(), bias.size()}});
    const Model::Ranges runs{{2, 3}, {10, 30}, {35, 36}};
    Replica r(shared, {runs, {}}, 100, atomic,
              {{false, true}, 3, SettledShares({{35, inf}, {12, inf}}, 3, 100)});
    const ParamSet& mine = r.params();
    for (std::size_t i : {2, 12, 13, 20, 35}) mine.data(0)[i] += 3.f;  // (13: 12's vector block)
    mine.data(1)[0] += 3.f;
    w[12] += 5.f;  // another writer's merge
    r.merge();
    CHECK(w[2] == 4.f);
    CHECK(w[12] == 7.f);
    CHECK(w[13] == 4.f);
    CHECK(w[20] == 4.f);
    CHECK(w[35] == 2.f);
    CHECK(bias[0] == 1.f);
    CHECK(w[11] == 1.f);
    for (std::size_t i : {2, 12, 13, 20, 35}) CHECK(mine.data(0)[i] == w[i]);
    r.merge();  // nothing changed since: nothing added again
    CHECK(w[12] == 7.f);
    CHECK(w[35] == 2.f);
  }
}

TEST_CASE("an epoch's replica starts from the shared weights: a wait's updates are not added again") {
  std::vector<float> w{1, 2, 3, 4}, b{5};
  const ParamSet shared({{"w", w.data(), w.size()}, {"b", b.data(), 1}});
  Replica r(shared, {}, 1000, false);
  // While this worker waited (for its thief, or for a share to take), the others
  // moved the weights.
  w[1] = 12.f;
  b[0] = -5.f;
  r.begin_epoch({}, 0);
  const ParamSet& mine = r.params();
  CHECK(std::vector<float>(mine.data(0), mine.data(0) + 4) == std::vector<float>{1, 12, 3, 4});
  CHECK(mine.data(1)[0] == -5.f);
  CHECK(w == std::vector<float>{1, 12, 3, 4});  // nothing written
  mine.data(1)[0] += 1.f;  // its own change is what a merge adds
  r.merge();
  CHECK(b[0] == -4.f);
}

TEST_CASE("a merge over many one-coordinate runs (a sparse model's) adds each change once") {
  // Runs of 1-3 floats take the inline path, runs of 16 and more the vector kernel;
  // the base is packed, so a wrong offset into it shows as a wrong sum.
  for (bool atomic : {false, true}) {
    INFO("atomic " << atomic);
    std::vector<float> w(200);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
    const Model::Ranges runs{{1, 2}, {4, 7}, {9, 10}, {20, 60}, {61, 62}, {100, 117}, {199, 200}};
    const ParamSet shared({{"w", w.data(), w.size()}});
    Replica r(shared, {runs}, 1, atomic);
    const ParamSet& mine = r.params();
    std::vector<float> want = w;
    for (std::size_t i = 0; i < w.size(); ++i) {
      bool in = false;
      for (auto [b, e] : runs) in |= i >= b && i < e;
      if (!in) continue;
      mine.data(0)[i] += 0.25f * static_cast<float>(i % 3);  // a third unchanged
      w[i] += 1000.f;                                          // another worker's merge
      want[i] += 1000.f + 0.25f * static_cast<float>(i % 3);
    }
    w[3] = -5.f;  // outside every run
    want[3] = -5.f;
    r.merge();
    CHECK(w == want);
    for (auto [b, e] : runs)
      for (std::size_t i = b; i < e; ++i) CHECK(mine.data(0)[i] == w[i]);
    r.merge();  // nothing changed since: nothing added twice
    CHECK(w == want);
  }
  std::vector<float> w(10);
  const ParamSet shared({{"w", w.data(), w.size()}});
  CHECK_THROWS_WITH_AS(Replica(shared, {{{0, 4}, {3, 5}}}, 1, false),
                       doctest::Contains("not sorted, disjoint and inside it"),
                       std::invalid_argument);
  CHECK_THROWS_AS(Replica(shared, {{{8, 11}}}, 1, false), std::invalid_argument);
}

TEST_CASE("--merge-every auto: F follows the cost of a merge against that of an example") {
  // Examples slow against a tiny merge: F falls towards kAutoMin.
  {
    std::vector<float> w(64, 1.f);
    Replica r(ParamSet({{"w", w.data(), w.size()}}), {}, Replica::kAuto, false);
    CHECK(r.every() == Replica::kAutoStart);
    for (int i = 0; i < 6; ++i) {
      while (!r.due(16)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // "training"
      r.merge();
    }
    MESSAGE("slow examples, 64-float merge: F " << r.every());
    CHECK(r.every() < Replica::kAutoStart / 4);
    CHECK(r.every() >= Replica::kAutoMin);
  }
  // Started elsewhere (--layout auto's probe: at the cap), within the bounds.
  {
    std::vector<float> w(64, 1.f);
    const ParamSet p({{"w", w.data(), w.size()}});
    CHECK(Replica(p, {}, Replica::kAuto, false, {}, Replica::kAutoMax).every() == Replica::kAutoMax);
    CHECK(Replica(p, {}, Replica::kAuto, false, {}, 1u << 30).every() == Replica::kAutoMax);
    CHECK(Replica(p, {}, Replica::kAuto, false, {}, 1).every() == Replica::kAutoMin);
    CHECK(Replica(p, {}, 100, false, {}, Replica::kAutoMax).every() == 100);  // a fixed F is F
  }
  // A large merge (8M floats) against examples that take no time: F rises to the cap.
  {
    std::vector<float> w(std::size_t{1} << 23, 1.f);
    Replica r(ParamSet({{"w", w.data(), w.size()}}), {}, Replica::kAuto, false);
    for (int i = 0; i < 8; ++i) {
      while (!r.due(16)) {
      }
      r.merge();
    }
    MESSAGE("instant examples, 8M-float merge: F " << r.every());
    CHECK(r.every() == Replica::kAutoMax);
  }
  // Through the trainer: two workers converge like serial, and the result reports
  // the merges and the F they ended with.
  auto [tr, te] = test::generated_problem(40000, 10000, 2000, 20, 0.0, 3);
  const auto serial = train(decayed(config(Mode::serial, 1, 0)), tr, &te);
  const auto r = train(decayed(config(Mode::hogwild, 2, TrainConfig::kMergeAuto)), tr, &te);
  MESSAGE("auto: loss " << r.test.loss << " (serial " << serial.test.loss << "), "
                        << r.merges << " merges, F at the end " << r.merge_every);
  // Under 2x oversubscription (ASan, two busy loops beside it) 30 runs ended at
  // 0.993-1.030x serial's loss with the bias summed: a worker preempted with F near
  // the cap merges thousands of examples late. With the bias's mean (release, the
  // same busy loops) 20 runs: 0.992-0.999x.
  CHECK(r.test.loss <= serial.test.loss * 1.10);
  CHECK(r.merges >= 2 * 2 * 8);  // every epoch's reload at its start and merge at its end, both workers
  CHECK(r.merge_every >= double(Replica::kAutoMin));
  CHECK(r.merge_every <= double(Replica::kAutoMax));
  CHECK(r.samples == 8ull * tr.rows());
}

TEST_CASE("merging after every example with one worker reproduces plain hogwild") {
  auto [tr, te] = test::generated_problem(5000, 1000, 300, 15, 0.0, 5);
  const auto plain = train(config(Mode::hogwild, 1, 0), tr, &te);
  for (std::size_t every : {std::size_t{1}, std::size_t{1} << 30}) {
    INFO("merge every " << every);
    const auto rep = train(config(Mode::hogwild, 1, every), tr, &te);
    // shared + (copy - base) rounds, so not bit for bit.
    CHECK(worst_difference(plain.parameters.at("w"), rep.parameters.at("w")) < 1e-4);
    CHECK(rep.parameters.at("b")[0] == doctest::Approx(plain.parameters.at("b")[0]).epsilon(1e-4));
    CHECK(rep.test.loss == doctest::Approx(plain.test.loss).epsilon(1e-4));
    CHECK(rep.samples == plain.samples);
  }
}

TEST_CASE("two processes merging a bias at once lose no merge's change") {
  // The shared weights in shared memory, each process's replica its own (after
  // fork). Mode hogwild: w's runs merge with a relaxed load and store, the bias (a
  // mean tensor, two writers) with fetch_add of half its change.
  constexpr std::size_t kMerges = 1000000;
  test::SharedBytes mem(8 * sizeof(float));
  auto* f = reinterpret_cast<float*>(mem.bytes.data());
  std::atomic_ref<float> ready(f[7]);  // both start together
  const ParamSet shared({{"w", f, 4}, {"b", f + 4, 1}});
  std::vector<pid_t> kids;
  for (int k = 0; k < 2; ++k) {
    kids.push_back(test::fork_child([&] {
      Replica r(shared, {{{0, 1}}, {}}, 1, /*atomic=*/false, {{false, true}, 2});
      ready.fetch_add(1.f);
      while (ready.load() < 2.f) {
      }
      for (std::size_t i = 0; i < kMerges; ++i) {
        r.params().data(0)[0] += 1.f;
        r.params().data(0)[1] += 1.f;  // outside w's ranges: never merged
        r.params().data(1)[0] += 1.f;
        r.merge();
      }
      return 0;
    }));
    if (kids.back() < 0) {  // the first child would wait for the second for ever
      for (pid_t kid : kids)
        if (kid > 0) kill(kid, SIGKILL);
      for (pid_t kid : kids)
        if (kid > 0) test::wait_exit(kid, 10);
      FAIL("fork failed");
    }
  }
  for (pid_t pid : kids) CHECK(test::wait_exit(pid, 60) == 0);
  // Every half-add made (multiples of 0.5 below 2^23 are exact in a float). w[0]'s
  // load and store may lose adds, as Hogwild's updates may: on 2 cores 23-30 % of
  // them. Merged with a load and store too, the bias lost 27-30 %.
  MESSAGE("w[0] (load and store): " << f[0] << " of " << 2 * kMerges << "; bias: " << f[4]
                                    << " of " << kMerges);
  CHECK(f[4] == float(kMerges));
  CHECK(f[1] == 0.f);
}

TEST_CASE("replicas merged every 256 examples converge like serial (hogwild and atomic)") {
  auto [tr, te] = test::generated_problem(40000, 10000, 2000, 20, 0.0, 3);
  const auto serial = train(decayed(config(Mode::serial, 1, 0)), tr, &te);
  MESSAGE("serial loss " << serial.test.loss << " accuracy " << serial.test.accuracy);
  for (Mode m : {Mode::hogwild, Mode::atomic}) {
    const auto r = train(decayed(config(m, 2, 256)), tr, &te);
    MESSAGE(to_string(m) << " x2 merge every 256: loss " << r.test.loss << " accuracy "
                         << r.test.accuracy);
    // How the two workers' merges interleave moves the final loss. At decay 0.8 it
    // reached 0.375 (serial 0.322, accuracy 0.028 below) once in CI under ASan with
    // another suite beside it; at 0.7, 40 runs under ASan with two busy loops beside
    // them ended at 0.3182-0.3236 (serial 0.3208), and with the bias's mean 20
    // release runs beside the same loops 0.3183-0.3215. A lost or doubled merge is caught
    // exactly by the first test case; this one bounds the convergence.
    CHECK(r.test.loss <= serial.test.loss * 1.10);
    CHECK(std::abs(r.test.accuracy - serial.test.accuracy) <= 0.02);
    CHECK(r.samples == 8ull * tr.rows());
  }
  // (Merging only at each epoch's end is not bounded here: each worker's whole
  // epoch starts from weights an epoch old and the two changes are summed, and at
  // decay 0.8 the final loss ranged 0.314-0.439 from run to run against serial's
  // 0.313, depending on whether a worker reloads before or after the other's merge.
  // docs/MODES.md says so.)
}

TEST_CASE("a settled feature's share follows the examples since the last merge: an epoch's short tail adds more") {
  // Rate ln 2 / 100: half settled in 100 examples, so 4 writers add half of its
  // change; after 10 examples it settles 6.7 %, 4 x that is below 1, all of it.
  using detail::SettledShares;
  std::vector<float> w(8, 1.f);
  const ParamSet shared({{"w", w.data(), w.size()}});
  Replica r(shared, {{}}, 100, false, {{false}, 4, SettledShares({{3, std::log(2.0) / 100}}, 4, 100)});
  const ParamSet& mine = r.params();
  mine.data(0)[3] += 4.f;
  CHECK(r.due(100));
  r.merge();
  CHECK(w[3] == doctest::Approx(3.f));
  mine.data(0)[3] += 4.f;
  CHECK_FALSE(r.due(10));
  r.merge();  // (as at an epoch's end)
  CHECK(w[3] == doctest::Approx(7.f));
}

TEST_CASE("many writers merging seldom converge: settled features add a share, not their sum") {
  // 4 replicas merging every 20,000 examples, and 8 hot windows flushing every
  // 10,000, on an RCV1-like problem (Zipf features, 75 a row) at lr 0.5: their
  // intervals span whole epochs of each worker, so the writers' changes are made
  // from the same weights, as 16 cores' are at ~2,000 (docs/PERFORMANCE.md, "16
  // cores"). Each change to the features in most rows is then the same correction.
  // Summed, as before settled_shares.hpp, they ended here at 0.67 and 2.40 against
  // serial's 0.49 (and the CLI's runs of each on 100k rows of the same set at
  // 0.56-2.06 against 0.50); with the shares, 0.488-0.507.
  auto [tr, te] = test::generated_problem(100000, 20000, 47236, 75, 0.03, 3);
  TrainConfig c = test::sgd_config(Mode::serial, 1);
  c.epochs = 3;
  c.step_size.decay = 0.7f;
  const auto serial = train(c, tr, &te);
  MESSAGE("serial loss " << serial.test.loss);
  TrainConfig r = c;
  r.mode = Mode::hogwild;
  r.workers = 4;
  r.merge_every = 20000;
  TrainConfig h = c;
  h.mode = Mode::hogwild;
  h.workers = 8;
  h.hot_k = 64;
  h.hot_flush = 10000;
  for (const TrainConfig& run : {r, h}) {
    const auto got = train(run, tr, &te);
    MESSAGE(run.workers << " workers, merge_every " << run.merge_every << ", hot_k " << run.hot_k
                        << ": loss " << got.test.loss);
    CHECK(got.test.loss <= serial.test.loss * 1.08);
  }
}

// Three classes of dense rows: 20 standard normal features, shifted by the class's
// own mean on its first 4.
Dataset blobs(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> labels, values;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = rng.below(3);
    labels.push_back(static_cast<float>(k));
    for (std::size_t j = 0; j < 20; ++j)
      values.push_back(static_cast<float>(rng.normal()) + (j / 4 == k ? 1.5f : 0.f));
  }
  return Dataset::dense(labels, values, 20, "blobs");
}

TEST_CASE("a dense model trains through its replica") {
  // Softmax over dense rows: every example changes every weight.
  const Dataset tr = blobs(6000, 11), te = blobs(1000, 12);
  TrainConfig c = config(Mode::hogwild, 2, 64);
  c.model = "softmax";
  c.batch = 8;
  c.epochs = 4;
  c.step_size.lr0 = 0.1f;
  const auto r = train(c, tr, &te);
  c.mode = Mode::serial;
  c.merge_every = 0;
  const auto s = train(c, tr, &te);
  MESSAGE("softmax serial accuracy " << s.test.accuracy << " loss " << s.test.loss
                                     << ", hogwild x2 replicas " << r.test.accuracy << " loss "
                                     << r.test.loss);
  CHECK(r.test.accuracy >= s.test.accuracy - 0.02);
  // Two workers' merges interleave differently from run to run: measured 0.092-0.098
  // here against serial's 0.0943 (0.98-1.04x), and 0.100 (1.06x) once on a loaded CI
  // machine. An untrained model's loss is log 3 = 1.1; a merge that lost updates
  // would show far above 10 %.
  CHECK(r.test.loss <= s.test.loss * 1.10);
}

TEST_CASE("--merge-every is validated against mode, optimizer and --hot-k") {
  auto [tr, te] = test::generated_problem(100, 10, 20, 3, 0.0, 1);
  for (Mode m : {Mode::serial, Mode::lock}) {
    CHECK_THROWS_WITH_AS(train(config(m, 2, 16), tr, &te),
                         doctest::Contains("--merge-every works with --mode hogwild or atomic"),
                         ConfigError);
  }
  auto c = config(Mode::hogwild, 2, 16);
  c.optimizer = Optimizer::adagrad;
  CHECK_THROWS_WITH_AS(train(c, tr, &te), doctest::Contains("--optimizer sgd only"), ConfigError);
  c = config(Mode::hogwild, 2, 16);
  c.hot_k = 8;
  CHECK_THROWS_WITH_AS(train(c, tr, &te), doctest::Contains("--hot-k"), ConfigError);
}
