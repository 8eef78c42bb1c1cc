// --layout (modes/hogwild/layout_probe.hpp): the probe's decision is a function of
// its figures, the probe's part alternates windows and every worker ends on the
// same decision, a restarted worker takes it, forcing a layout works, and every
// layout trains to the same accuracy bounds as serial.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/degrees.hpp"
#include "hogwild/error.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/options.hpp"
#include "hogwild/trainer.hpp"
#include "modes/hogwild/layout_probe.hpp"
#include "ridge.hpp"
#include "support.hpp"

using namespace hogwild;
using hogwild::detail::ProbeFigures;

TEST_CASE("the probe's rule: replicas at 1.1x plain or less, plain otherwise or unmeasured") {
  using detail::choose_layout;
  // Injected figures: the decision depends on them alone.
  CHECK(choose_layout({1000, 1100, 16}).layout == WeightLayout::replicas);  // the edge
  CHECK(choose_layout({1000, 1101, 16}).layout == WeightLayout::plain);
  CHECK(choose_layout({1000, 400, 16}).layout == WeightLayout::replicas);
  CHECK(choose_layout({400, 1000, 16}).layout == WeightLayout::plain);
  CHECK(choose_layout({1000, 1000, 16}).layout == WeightLayout::replicas);  // a tie: replicas
  // Nothing measured of one phase, or figures that are not numbers: plain.
  CHECK(choose_layout({0, 500, 8}).layout == WeightLayout::plain);
  CHECK(choose_layout({500, 0, 8}).layout == WeightLayout::plain);
  CHECK(choose_layout({std::nan(""), 100, 8}).layout == WeightLayout::plain);
  CHECK(choose_layout({1000, INFINITY, 8}).layout == WeightLayout::plain);
  CHECK(choose_layout({0, 500, 8}).why.find("no whole window") != std::string::npos);
  // The reason carries the figures.
  const auto d = choose_layout({830, 412, 16});
  CHECK(d.why.find("830 ns") != std::string::npos);
  CHECK(d.why.find("412 ns") != std::string::npos);
  CHECK(d.why.find("0.50x") != std::string::npos);
  CHECK(d.why == choose_layout({830, 412, 16}).why);
  CHECK(d.why.find("hot") == std::string::npos);  // not a choice
}

TEST_CASE("with hot coordinates: the cheaper private layout at 1.1x plain or less, hot on a tie") {
  using detail::choose_layout;
  using enum WeightLayout;
  // {shared, replica, windows, hot}
  CHECK(choose_layout({1000, 700, 18, 450}).layout == hot);
  CHECK(choose_layout({1000, 450, 18, 700}).layout == replicas);
  CHECK(choose_layout({1000, 600, 18, 600}).layout == hot);       // a tie: hot
  CHECK(choose_layout({1000, 1200, 18, 1100}).layout == hot);     // the edge
  CHECK(choose_layout({1000, 1200, 18, 1101}).layout == plain);
  CHECK(choose_layout({1000, 1100, 18, 1101}).layout == replicas);
  CHECK(choose_layout({1000, 1300, 18, 1300}).layout == plain);
  // Hot unmeasured (or not a number): the two others decide.
  CHECK(choose_layout({1000, 700, 18, 0}).layout == replicas);
  CHECK(choose_layout({1000, 1200, 18, std::nan("")}).layout == plain);
  // Hot alone measured is not enough: the shared and replica phases come first.
  CHECK(choose_layout({1000, 0, 18, 300}).layout == plain);
  const auto d = choose_layout({1000, 700, 18, 450});
  CHECK(d.why.find("450 ns with hot coordinates") != std::string::npos);
  CHECK(d.why.find("0.45x") != std::string::npos);
  CHECK(d.why.find("18 windows") != std::string::npos);
}

TEST_CASE("who probes: hogwild, 2 to 4 workers, sgd, nothing else choosing the layout") {
  using detail::no_probe;
  TrainConfig c = test::sgd_config(Mode::hogwild, 2);
  CHECK_FALSE(no_probe(c, 2).has_value());
  CHECK_FALSE(no_probe(c, detail::kMaxWorkers).has_value());
  CHECK(no_probe(c, 1)->find("one worker") != std::string::npos);
  CHECK(no_probe(c, detail::kMaxWorkers + 1)->find("more than 4 workers") != std::string::npos);
  const auto why = [&](auto change) {
    TrainConfig x = c;
    change(x);
    const auto r = no_probe(x, 2);
    return r ? *r : std::string("(probes)");
  };
  CHECK(why([](TrainConfig& x) { x.layout = WeightLayout::plain; }) == "--layout plain");
  CHECK(why([](TrainConfig& x) { x.layout = WeightLayout::replicas; }) == "--layout replicas");
  CHECK(why([](TrainConfig& x) { x.merge_every = 100; }) == "--merge-every");
  CHECK(why([](TrainConfig& x) { x.hot_k = 8; }) == "--hot-k");
  CHECK(why([](TrainConfig& x) { x.optimizer = Optimizer::adagrad; }).find("optimiser state") !=
        std::string::npos);
  CHECK(why([](TrainConfig& x) { x.mode = Mode::atomic; }) == "--mode atomic");
  CHECK(why([](TrainConfig& x) { x.telemetry = true; }).find("--telemetry") != std::string::npos);
  CHECK(why([](TrainConfig& x) { x.conflicts = true; }).find("--conflicts") != std::string::npos);
  CHECK(why([](TrainConfig& x) { x.replicas_unsound = true; }).find("feature-indexed") !=
        std::string::npos);
}

TEST_CASE("auto probes a feature-indexed model on sparse rows only") {
  auto [tr, te] = test::generated_problem(2000, 100, 1000, 20, 0.0, 3);
  const Dataset blobs = test::class_blobs(100, 6, 1);
  const auto linear = make_model("logistic");
  const auto softmax = make_model("softmax");
  CHECK(detail::replicas_sound(*linear, tr));
  CHECK_FALSE(detail::replicas_sound(*linear, blobs));   // dense rows
  CHECK_FALSE(detail::replicas_sound(*softmax, tr));     // not feature-indexed
  CHECK_FALSE(detail::replicas_sound(*make_model("mf"), tr));
  TrainConfig c = test::sgd_config(Mode::hogwild, 2);
  detail::resolve_layout(c, blobs, *linear);
  CHECK(c.replicas_unsound);
  CHECK(detail::no_probe(c, 2).has_value());
  detail::resolve_layout(c, tr, *linear);  // resolved again: from these rows
  CHECK_FALSE(c.replicas_unsound);
  CHECK_FALSE(detail::no_probe(c, 2).has_value());
  c.layout = WeightLayout::replicas;  // forced: the user's to choose
  detail::resolve_layout(c, blobs, *softmax);
  CHECK_FALSE(c.replicas_unsound);
  // A whole run on dense rows: plain, no probe, and the summary says why.
  TrainConfig run = test::sgd_config(Mode::hogwild, 2);
  run.epochs = 2;
  const auto r = train(run, *make_model("softmax"), blobs, nullptr);
  CHECK_FALSE(r.layout.probed);
  CHECK(r.layout.chosen == "plain");
  CHECK(r.layout.why.find("feature-indexed") != std::string::npos);
  CHECK(r.merges == 0);
}

TEST_CASE("--layout replicas and hot become --merge-every auto and --hot-k from the degrees") {
  auto [tr, te] = test::generated_problem(6000, 100, 3000, 20, 0.0, 3);
  const auto linear = make_model("logistic");
  TrainConfig c = test::sgd_config(Mode::hogwild, 2);
  c.layout = WeightLayout::replicas;
  detail::resolve_layout(c, tr, *linear);
  CHECK(c.merge_every == TrainConfig::kMergeAuto);
  c.merge_every = 100;  // given: kept
  detail::resolve_layout(c, tr, *linear);
  CHECK(c.merge_every == 100);

  TrainConfig h = test::sgd_config(Mode::hogwild, 2);
  h.layout = WeightLayout::hot;
  detail::resolve_layout(h, tr, *linear);
  std::size_t want = 0;
  for (const FeatureDegree& d : feature_degrees(tr, tr.cols()))
    want += std::uint64_t{d.rows} * detail::kHotShare >= tr.rows();
  MESSAGE("features in 1/64 of the rows or more: " << want << ", --hot-k " << h.hot_k);
  CHECK(want >= 1);
  CHECK(h.hot_k == std::min(want, detail::kHotMost));
  h.hot_k = 5;  // given: kept
  detail::resolve_layout(h, tr, *linear);
  CHECK(h.hot_k == 5);

  TrainConfig dense = test::sgd_config(Mode::hogwild, 2);
  dense.layout = WeightLayout::hot;
  const Dataset blobs = test::class_blobs(100, 6, 1);
  CHECK_THROWS_WITH_AS(detail::resolve_layout(dense, blobs, *linear),
                       doctest::Contains("--layout hot needs sparse rows"), ConfigError);
  const auto mf = make_model("mf");
  CHECK_THROWS_WITH_AS(detail::resolve_layout(dense, tr, *mf),
                       doctest::Contains("--layout hot works with the linear models (logistic, "
                                         "hinge, squared), not mf"),
                       ConfigError);
}

TEST_CASE("--layout refuses what contradicts it") {
  const auto refused = [](auto change, const char* says) {
    TrainConfig c = test::sgd_config(Mode::hogwild, 2);
    change(c);
    CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains(says), ConfigError);
  };
  refused([](TrainConfig& c) { c.layout = WeightLayout::plain; c.merge_every = 64; },
          "--layout plain and --merge-every exclude each other");
  refused([](TrainConfig& c) { c.layout = WeightLayout::replicas; c.hot_k = 8; },
          "--layout replicas and --hot-k exclude each other");
  refused([](TrainConfig& c) { c.layout = WeightLayout::hot; c.merge_every = 64; },
          "--layout hot and --merge-every exclude each other");
  refused([](TrainConfig& c) { c.layout = WeightLayout::replicas; c.optimizer = Optimizer::adagrad; },
          "--layout replicas works with --optimizer sgd only");
  refused([](TrainConfig& c) { c.layout = WeightLayout::plain; c.mode = Mode::atomic; },
          "--layout applies to --mode hogwild");
  refused([](TrainConfig& c) { c.layout = WeightLayout::replicas; c.conflicts = true; },
          "with --layout replicas");
  TrainConfig c;
  CHECK_THROWS_WITH_AS(set_option(c, "layout", "sideways"),
                       doctest::Contains("--layout must be auto, plain, hot or replicas"),
                       ConfigError);
  // What agrees is taken.
  TrainConfig ok = test::sgd_config(Mode::hogwild, 2);
  ok.layout = WeightLayout::replicas;
  ok.merge_every = 64;
  CHECK_NOTHROW(ok.validate());
}

namespace {

// Two probes on one set of weights, as two workers' parts would be (in one process:
// the part's logic, not the machine's caches), on a clock the test moves.
std::uint64_t fake_ns = 0;
std::uint64_t fake_clock() { return fake_ns; }

struct TwoWorkers {
  std::vector<float> w = std::vector<float>(256, 0.f);
  ParamSet shared{{{"w", w.data(), w.size()}}};
  std::vector<WorkerProgress> records = std::vector<WorkerProgress>(2);
  // Each worker's hot window, where the probe has one: coordinate 3 hot, in slot 0
  // (a step's `w + index` for the renumbered feature lands there).
  std::vector<float> windows[2] = {std::vector<float>(1), std::vector<float>(1)};
  std::unique_ptr<detail::LayoutProbe> probe(unsigned rank, bool hot = false) {
    auto p = std::make_unique<detail::LayoutProbe>(
        std::make_unique<Replica>(shared, std::vector<Ranges>{}, Replica::kAuto, false),
        std::span<WorkerProgress>(records), rank,
        hot ? std::make_unique<HotWindow>(shared, std::vector<std::uint32_t>{3},
                                          windows[rank].data(), 256, 2)
            : nullptr);
    p->use_clock(fake_clock);
    return p;
  }
};

}  // namespace

TEST_CASE("the probe alternates whole windows, then every worker takes the run's decision") {
  // A batch on the shared weights costs 100 us of the clock; on a replica `cost` of
  // that (each worker its own), with hot coordinates `hot` of it (0: not a choice,
  // two phases). Both workers' batches move the one clock, as both
  // share a machine's time. The first windows run cold (every batch 5x), as a
  // worker's first windows do, and one later window is slow (107, 4x: the core
  // taken away a while; a close call's, after a clear one has decided): the warm windows (101, 102: on a private copy) are not measured and
  // the median leaves the slow one out, so the figures are the steady ones whichever
  // phase came first. A clear call for a private layout (0.5x: kClearCall; with
  // hot, the first measured window of each is off by up to 1.6x at the edges, so
  // its cases are clear by more) ends a worker's probe after one measured window
  // of each phase (103, 104, and 105 with hot); plain is never clear (2x: the
  // replica is measured kPairs beside it; at 2x and more on two of three phases the
  // reads of the clock, every 8 batches, skip whole windows, so plain with hot far
  // behind is left to the rule's test), a close
  // one (1.3x, 1x; hot and replicas within 1.5x of each other) after kPairs; the
  // decision follows within a few batches of the last worker's figures (a worker
  // that has published looks for the others' at every read of the clock, not at the
  // next window).
  // Each case's choice, call and windows, worked out by hand from the weights
  // (plain 1, the private layouts their cost / 1.1): a call is clear when every
  // other weight is at least 1.5x the cheapest, a private layout (one window of
  // each phase); a phase at 1.5x or more is ruled out after its first window (but
  // with plain the cheapest, not the cheaper private one), the others take kPairs.
  struct Costs {
    double replica, hot;
    WeightLayout want;
    bool clear;
    unsigned windows;  // each worker measures
    unsigned left;     // phases left for the run after the first of each (contenders)
  };
  using enum WeightLayout;
  for (Costs cost : {Costs{0.5, 0, replicas, true, 2, 0b010}, Costs{1.3, 0, plain, false, 6, 0b011},
                     Costs{2.0, 0, plain, false, 6, 0b011}, Costs{0.9, 0.4, hot, true, 3, 0b100},
                     Costs{0.6, 0.55, hot, false, 7, 0b110}, Costs{0.5, 2.0, replicas, true, 3, 0b010},
                     Costs{1.3, 1.3, plain, false, 9, 0b111}, Costs{0.65, 0.6, hot, false, 7, 0b110},
                     Costs{0.55, 0.6, replicas, false, 7, 0b110}}) {
    INFO("replica batch at " << cost.replica << "x a shared one, hot at " << cost.hot << "x");
    const bool hot = cost.hot > 0;
    const unsigned kinds = hot ? 3 : 2;
    TwoWorkers t;
    fake_ns = 1'000'000'007;  // mid-window 100
    auto a = t.probe(0, hot), b = t.probe(1, hot);
    const Batch batch{nullptr, nullptr, nullptr, 1};
    const detail::EpochPlace place{};
    bool saw[3] = {false, false, false}, warm_elsewhere = false, saw_hot_warm = false;
    std::uint64_t updates = 0, decided_ns = 0, published_ns = 0;
    for (int step = 0; step < 200000 && !(a->decided() && b->decided()); ++step) {
      for (auto* p : {a.get(), b.get()}) {
        // What the step would train: the shared weights (0), the replica's copy (1),
        // or the shared weights with coordinate 3 in the hot window (2).
        const ParamSet* trained = p->trained();
        const int on = p->on();
        saw[on] = true;
        CHECK((trained != nullptr) == (on != 0));
        CHECK(p->writes_later() == (on != 0));
        const std::uint64_t window = fake_ns / detail::kWindowNs;
        // The run's warm windows on a private copy: 102 whole (the read of the clock
        // that sees 101 begin comes up to 8 batches in, as it may in any window).
        // So are its steps before the first window (100): on the replica, and the
        // last warm window on the hot window where there is one.
        // (102's first batches may still be on the replica, before the read of the
        // clock that sees 102 begin.)
        if ((window == 100 || window == 101) && on != 1) warm_elsewhere = true;
        if (window == 102 && (on == 0 || (!hot && on != 1))) warm_elsewhere = true;
        if (window == 102 && hot && on == 2) saw_hot_warm = true;
        if (on == 1) {
          CHECK(trained->data(0) != t.w.data());
          trained->data(0)[3] += 1.f;  // an update on the copy, merged in its window
        } else if (on == 2) {
          CHECK(trained->data(0) == t.w.data());  // only the hot ones are the window's
          t.windows[p == a.get() ? 0 : 1][0] += 1.f;  // flushed in its window
        } else {
          t.w[3] += 1.f;
        }
        ++updates;
        // (Cold, every batch costs 500 us whatever it trains.)
        const double mine = window <= 102 ? 5 : on == 1 ? cost.replica : on == 2 ? cost.hot : 1.0;
        fake_ns += static_cast<std::uint64_t>(100'000 * mine * (window == 107 ? 4 : 1));
        p->after_batch(batch, 0.1f, place);
        if (!published_ns && t.records[0].probed.load() && t.records[1].probed.load())
          published_ns = fake_ns;
      }
      if (a->decided() && b->decided()) decided_ns = fake_ns;
    }
    REQUIRE(a->decided());
    REQUIRE(b->decided());
    CHECK(saw[0]);
    CHECK(saw[1]);
    CHECK(saw[2] == hot);
    CHECK_FALSE(warm_elsewhere);
    CHECK(saw_hot_warm == hot);
    // Within 16 batches of each (8 to the first decision, 8 to the other's taking
    // it: its reads of the clock, 100 us a batch on the shared weights), not at the
    // next window.
    REQUIRE(published_ns > 0);
    CHECK(decided_ns - published_ns <= 3'200'000);
    const WeightLayout want = cost.want;
    const bool clear = cost.clear;
    unsigned windows = 0;
    for (int i = 0; i < 2; ++i) {
      const ProbeFigures f = (i == 0 ? a : b)->own();
      MESSAGE("shared " << f.shared_ns << " ns, replica " << f.replica_ns << " ns, hot "
                        << f.hot_ns << " ns, " << f.windows << " windows");
      CHECK(f.windows == cost.windows);
      windows += f.windows;
      // One window of a phase: its edges hold the other worker's phase for a few
      // batches.
      const double close = cost.windows == kinds * detail::kPairs ? 0.05 : 0.5;
      CHECK(f.replica_ns / f.shared_ns == doctest::Approx(cost.replica).epsilon(close));
      CHECK((cost.replica < 1) == (f.replica_ns < f.shared_ns));
      if (hot) {
        CHECK(f.hot_ns / f.shared_ns == doctest::Approx(cost.hot).epsilon(close));
      } else {
        CHECK(f.hot_ns == 0);
      }
    }
    // One decision for the run, from both workers' figures, recorded with it and
    // taken by both.
    const std::uint32_t chosen = detail::run_decision(t.records);
    CHECK(chosen == 1 + static_cast<std::uint32_t>(want));
    CHECK(t.records[0].layout.load() == chosen);
    CHECK(t.records[1].layout.load() == chosen);
    const ProbeFigures decided{t.records[0].run_shared_ns.load(), t.records[0].run_replica_ns.load(),
                               t.records[0].run_windows.load(), t.records[0].run_hot_ns.load()};
    CHECK(decided.windows == windows);
    CHECK(detail::choose_layout(decided).layout == want);
    CHECK(detail::clear_call(decided) == clear);
    // The run's phases left, posted once for every worker.
    CHECK((t.records[0].run_live.load() & 7) == cost.left);
    CHECK(a->on() == (want == WeightLayout::replicas ? 1 : want == WeightLayout::hot ? 2 : 0));
    CHECK(a->idle() == (want == WeightLayout::plain));
    // Every update reached the shared weights, none twice: the replicas' through
    // their merges, the hot windows' through their flushes (whole numbers of 1,
    // exact in float).
    a->end_epoch(0.1f, place, true);
    b->end_epoch(0.1f, place, true);
    CHECK(t.w[3] == static_cast<float>(updates));
  }
}

TEST_CASE("a worker clear on its own waits for the others' whole probe") {
  // Worker 1 never reaches a read of the clock (slow to start, or its first pair not
  // clear): worker 0, clear after its first pair (window 105), waits the 2 (kPairs -
  // 1) windows a whole probe takes more, and kWaitWindows after, before it decides
  // from its own figures alone (as it would for a worker that died).
  TwoWorkers t;
  fake_ns = 1'000'000'007;  // mid-window 100
  auto a = t.probe(0);
  const Batch batch{nullptr, nullptr, nullptr, 1};
  const detail::EpochPlace place{};
  std::uint64_t published_in = 0;
  for (int step = 0; step < 200000 && !a->decided(); ++step) {
    const ParamSet* trained = a->trained();
    fake_ns += trained ? 50'000 : 100'000;  // replicas at 0.5x: a clear call
    a->after_batch(batch, 0.1f, place);
    if (!published_in && t.records[0].probed.load()) published_in = fake_ns / detail::kWindowNs;
  }
  REQUIRE(a->decided());
  CHECK(a->own().windows == 2);
  CHECK(published_in == 105);
  CHECK(fake_ns / detail::kWindowNs == published_in + 2 * (detail::kPairs - 1) + detail::kWaitWindows);
  CHECK(t.records[0].run_windows.load() == 2);  // its figures alone
  CHECK(detail::run_decision(t.records) == 1 + static_cast<std::uint32_t>(WeightLayout::replicas));
}

namespace {
std::uint64_t fake_cpu_ns = 0;
std::uint64_t fake_cpu_clock() { return fake_cpu_ns; }
}  // namespace

TEST_CASE("the probe measures the worker's CPU time, not the time others had its core") {
  // One worker whose core another process shares whenever it trains the shared
  // weights: there a batch takes 400 us of the clock but 100 us of its CPU time; on
  // the replica, 130 us of both. On the clock replicas would be a clear call (0.33x);
  // in CPU time, plain is the cheaper (1.3x), measured kPairs windows of each.
  TwoWorkers t;
  fake_ns = 1'000'000'007;  // mid-window 100
  fake_cpu_ns = 0;
  auto a = t.probe(0);
  a->use_clock(fake_clock, fake_cpu_clock);
  const Batch batch{nullptr, nullptr, nullptr, 1};
  const detail::EpochPlace place{};
  for (int step = 0; step < 200000 && !a->decided(); ++step) {
    const bool shared = a->trained() == nullptr;
    fake_cpu_ns += shared ? 100'000 : 130'000;
    fake_ns += shared ? 400'000 : 130'000;
    a->after_batch(batch, 0.1f, place);
  }
  REQUIRE(a->decided());
  const ProbeFigures f = a->own();
  CHECK(f.windows == 2 * detail::kPairs);
  CHECK(f.shared_ns == doctest::Approx(100'000));
  CHECK(f.replica_ns == doctest::Approx(130'000));
  CHECK(detail::run_decision(t.records) == 1 + static_cast<std::uint32_t>(WeightLayout::plain));
}

TEST_CASE("the probe's windows: 10 ms, 5 ms where each worker's share of the run is short") {
  using detail::probe_window_ns;
  // kShortRun (500k) examples a worker and more: 10 ms.
  CHECK(probe_window_ns(3, 500'000, 2) == 10'000'000);    // RCV1-like: 750k a worker
  CHECK(probe_window_ns(2, 500'000, 2) == 10'000'000);    // 500k a worker
  CHECK(probe_window_ns(1, 999'999, 2) == 5'000'000);     // one short of it
  CHECK(probe_window_ns(60, 4'810, 2) == 5'000'000);      // SpamAssassin: 144k a worker
  CHECK(probe_window_ns(60, 4'810, 4) == 5'000'000);
  CHECK(probe_window_ns(1000, 4'810, 4) == 10'000'000);   // 1.2M a worker
  // The probe's lengths follow: 20 ms of warm windows, kinds x pairs measured, one
  // partial.
  CHECK(detail::probe_ms(1, 3, 5'000'000) == 40);  // 4 warm windows of 5 ms, 2 of 10
  CHECK(detail::warm_windows(5'000'000) == 4);
  CHECK(detail::warm_windows(10'000'000) == 2);
  CHECK(detail::probe_ms(detail::kPairs, 2, 10'000'000) == 90);
  // The summary's why names the windows' length.
  CHECK(detail::choose_layout({1000, 500, 4, 0, 5'000'000}).why.find("windows of 5 ms") !=
        std::string::npos);
  CHECK(detail::choose_layout({1000, 500, 4}).why.find("windows of 10 ms") != std::string::npos);
}

TEST_CASE("the pooled figures: each phase's mean over the workers that measured every one") {
  std::vector<WorkerProgress> records(3);
  const auto publish = [&](int i, double shared, double replica, double hot, unsigned windows) {
    records[i].probe_shared_ns = shared;
    records[i].probe_replica_ns = replica;
    records[i].probe_hot_ns = hot;
    records[i].probe_windows = windows;
    records[i].probed = 1;
  };
  publish(0, 1000, 600, 400, 7);
  publish(1, 1200, 0, 0, 1);  // started late: one shared window
  // (record 2 never published: left out)
  records[2].probe_hot_ns = 5;
  ProbeFigures f = detail::pooled_figures(records);
  CHECK(f.shared_ns == 1000);  // worker 0's alone: it measured every phase
  CHECK(f.replica_ns == 600);
  CHECK(f.hot_ns == 400);
  CHECK(f.windows == 8);       // (every worker's windows)
  publish(2, 1400, 800, 600, 6);
  f = detail::pooled_figures(records);
  CHECK(f.shared_ns == 1200);  // workers 0 and 2
  CHECK(f.replica_ns == 700);
  CHECK(f.hot_ns == 500);
  CHECK(f.windows == 14);
  // No worker measured every phase: each figure's mean over those that measured it
  // (a zero is no figure).
  publish(0, 1000, 600, 0, 2);
  publish(2, 0, 800, 600, 2);
  f = detail::pooled_figures(records);
  CHECK(f.shared_ns == 1100);
  CHECK(f.replica_ns == 700);
  CHECK(f.hot_ns == 600);
  // SpamAssassin, the first worker's call for hot (its figures below) ruled the
  // shared phase out before the second, slow in its first windows, measured it: the
  // means over each phase's workers gave plain (2065 ns against 3887 and 3341); the
  // first worker's figures give hot.
  std::vector<WorkerProgress> two(2);
  two[0].probe_shared_ns = 2065;
  two[0].probe_replica_ns = 4072;
  two[0].probe_hot_ns = 1460;
  two[1].probe_replica_ns = 3703;
  two[1].probe_hot_ns = 5221;
  two[0].probed = two[1].probed = 1;
  CHECK(detail::choose_layout(detail::pooled_figures(two)).layout == WeightLayout::hot);
}

TEST_CASE("a clear call: replicas at 1.1/1.5x plain's cost or less, never plain") {
  using detail::clear_call;
  CHECK(clear_call({1000, 733, 2}));   // 0.733x <= 1.1 / 1.5
  CHECK(!clear_call({1000, 734, 2}));
  CHECK(!clear_call({1000, 1000, 2}));  // close: kPairs windows of each
  CHECK(!clear_call({1000, 1649, 2}));
  CHECK(!clear_call({1000, 1651, 2}));  // 1.651x >= 1.1 * 1.5, but plain is never clear
  CHECK(!clear_call({1000, 5000, 2}));
  CHECK(!clear_call({0, 500, 1}));      // a phase unmeasured: never clear
  CHECK(!clear_call({500, 0, 1}));
  CHECK(!clear_call({std::nan(""), 500, 2}));
  // Three phases: the cheapest by weight (the private ones / 1.1) at 1.5x of every
  // other's or less.
  CHECK(clear_call({1000, 700, 3, 450}));    // weights 1000, 636, 409: 636 >= 1.5 * 409
  CHECK(!clear_call({1000, 670, 3, 450}));   // replicas 609 < 614
  CHECK(clear_call({1000, 2000, 3, 733}));   // plain 1000 >= 1.5 * 666
  CHECK(!clear_call({1000, 2000, 3, 734}));
  CHECK(!clear_call({1000, 1700, 3, 1700}));  // plain, the others at 1545: never clear
  CHECK(!clear_call({1000, 1700, 3, 1600}));  // hot at 1455
  // What stays in the running (bits: 0 shared, 1 replica, 2 hot).
  using detail::contenders;
  CHECK(contenders({1000, 600, 3, 550}) == 0b110);   // plain at 2x hot's weight: out
  CHECK(contenders({1000, 1300, 3, 1300}) == 0b111);
  CHECK(contenders({1000, 700, 3, 450}) == 0b100);   // clear
  CHECK(contenders({1000, 1700, 3, 1600}) == 0b101);
  // Plain cheapest: the cheaper private layout stays in, however far behind.
  CHECK(contenders({1000, 5000, 3, 4000}) == 0b101);
  CHECK(contenders({1000, 4000, 3, 5000}) == 0b011);
  CHECK(contenders({1000, 4400, 3, 4400}) == 0b101);  // a tie: hot
  CHECK(contenders({1000, 5000, 2}) == 0b111);        // hot not measured
  CHECK(contenders({1000, 1651, 2, 0}) == 0b111);
  CHECK(contenders({1000, 500, 2}) == 0b110);        // hot not measured: not ruled out
  CHECK(contenders({1000, 0, 2, 500}) == 0b111);     // replicas not measured: nothing is
}

TEST_CASE("the first decision is the run's; a worker restarted after it takes it") {
  TwoWorkers t;
  // Two workers deciding from different figures: the second takes the first's.
  CHECK(detail::settle(t.records, {1000, 500, 12}) == 1 + static_cast<std::uint32_t>(WeightLayout::replicas));
  CHECK(detail::settle(t.records, {500, 1000, 12}) == 1 + static_cast<std::uint32_t>(WeightLayout::replicas));
  CHECK(t.records[0].run_replica_ns.load() == 500);
  for (WeightLayout l : {WeightLayout::plain, WeightLayout::replicas}) {
    INFO(std::string(to_string(l)));
    TwoWorkers r;
    r.records[0].run_layout.store(1 + static_cast<std::uint32_t>(l));
    auto again = r.probe(1);
    CHECK(again->decided());
    CHECK(r.records[1].layout.load() == 1 + static_cast<std::uint32_t>(l));
    CHECK((again->trained() != nullptr) == (l == WeightLayout::replicas));
  }
}

TEST_CASE("each layout trains to serial's accuracy; auto says what it chose and why") {
  auto [tr, te] = test::generated_problem(40000, 10000, 2000, 20, 0.0, 3);
  // The last epoch at step size 0.04, not sgd_config's 0.1: a hot window's or a
  // replica's change is measured from the shared weights at its last write-back, so
  // when two workers end together (--balance steal splits the last rows between
  // them) the bias holds both their last corrections, about sqrt(3) times one
  // iterate's noise. At 0.1 that ended 40 runs of the hot layout at test loss up to
  // 0.38 (static shares, which end on one worker: 0.313); at 0.04, at 0.329 or less
  // (static 0.319, serial 0.321).
  const auto config = [](Mode mode, unsigned workers) {
    TrainConfig c = test::sgd_config(mode, workers);
    c.step_size.decay = 0.7f;
    return c;
  };
  const auto serial = train(config(Mode::serial, 1), tr, &te);
  CHECK(serial.layout.chosen.empty());  // not hogwild's
  MESSAGE("serial: loss " << serial.test.loss << " accuracy " << serial.test.accuracy);
  for (WeightLayout l : {WeightLayout::plain, WeightLayout::hot, WeightLayout::replicas,
                         WeightLayout::automatic}) {
    INFO(std::string(to_string(l)));
    TrainConfig c = config(Mode::hogwild, 2);
    c.layout = l;
    // Long enough for the probe to end (it takes 50-90 ms; 40 epochs of these
    // rows about 0.4 s at 2 workers in the release build).
    if (l == WeightLayout::automatic) c.epochs = 40;
    const auto r = train(c, tr, &te);
    MESSAGE(std::string(to_string(l)) << ": " << r.layout.chosen << " (" << r.layout.why << "), loss "
                         << r.test.loss << " accuracy " << r.test.accuracy << ", " << r.merges
                         << " merges");
    CHECK(r.test.loss <= serial.test.loss * 1.10);
    CHECK(std::abs(r.test.accuracy - serial.test.accuracy) <= 0.02);
    CHECK(r.samples == std::uint64_t{c.epochs} * tr.rows());
    if (l == WeightLayout::automatic) {
      CHECK(r.layout.probed);
      REQUIRE(r.layout.workers.size() == 2);
      // At least one worker's windows: one of each phase on a clear call.
      // Sparse rows of a linear model, a few MiB: hot coordinates are a choice, and
      // were measured.
      CHECK(r.layout.hot_ns > 0);
      const ProbeFigures f{r.layout.shared_ns, r.layout.replica_ns, r.layout.windows,
                           r.layout.hot_ns};
      // At least one worker's first window of each phase: the phases ruled out
      // after them are the first worker's call for the run (one phase left: every
      // worker publishes), which the pooled figures need not repeat.
      CHECK(r.layout.windows >= 3u);
      CHECK(r.layout.workers[0] != "none");
      CHECK(r.layout.workers[0] == r.layout.workers[1]);
      // The decision is the rule's on the figures recorded with it.
      const auto rule = detail::choose_layout(f);
      CHECK(r.layout.chosen == to_string(rule.layout));
      CHECK(r.layout.why == rule.why);
      CHECK(r.layout.workers[0] == r.layout.chosen);
      if (r.layout.chosen == "replicas") CHECK(r.merges > 0);  // (the probe's windows merge too)
      // The progress said so once every worker had decided.
      bool told = false;
      for (const auto& p : r.history) told = told || p.layout.find("layout " + r.layout.chosen) == 0;
      CHECK(told);
    } else {
      CHECK_FALSE(r.layout.probed);
      CHECK(r.layout.chosen == to_string(l));
      CHECK(r.layout.why == std::string("--layout ") + to_string(l));
      CHECK((r.merges > 0) == (l == WeightLayout::replicas));
    }
  }
  // One worker never probes.
  TrainConfig one = test::sgd_config(Mode::hogwild, 1);
  const auto r = train(one, tr, &te);
  CHECK_FALSE(r.layout.probed);
  CHECK(r.layout.chosen == "plain");
  CHECK(r.layout.why.find("one worker") != std::string::npos);
}

TEST_CASE("the CLI: the first lines and the summary say the layout" * doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  const auto [train_file, test_file] = test::problem_files(dir, 4000);
  const std::string summary = dir.file("s.json");
  const auto forced = test::run_train({"--train", train_file, "--test", test_file, "--workers", "2",
                                       "--epochs", "2", "--layout", "replicas", "--summary", summary});
  REQUIRE(forced.exit_code == 0);
  CHECK(forced.out.find("layout replicas (--layout replicas)") != std::string::npos);
  const auto layout = nlohmann::json::parse(test::read_text(summary)).at("layout");
  CHECK(layout.at("chosen") == "replicas");
  CHECK(layout.at("requested") == "replicas");
  CHECK(layout.at("probed") == false);
  const auto probing = test::run_train({"--train", train_file, "--workers", "2", "--epochs", "1"});
  REQUIRE(probing.exit_code == 0);
  CHECK(probing.out.find("layout auto: a probe times the shared weights against a replica and "
                         "against ") != std::string::npos);
  // (4000 rows, one epoch: a short run, whose windows are 5 ms.)
  CHECK(probing.out.find(" hot coordinates in the first 40-70 ms") != std::string::npos);
  const auto one = test::run_train({"--train", train_file, "--epochs", "1"});
  REQUIRE(one.exit_code == 0);
  CHECK(one.out.find("layout plain (one worker") != std::string::npos);
  const auto bad = test::run_train({"--train", train_file, "--layout", "sideways"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("--layout must be auto, plain, hot or replicas") != std::string::npos);
}

namespace {

// Aborts the worker the first time one of its steps trains a private copy (a
// replica window of the probe): the address of the parameters it first trained
// (the shared weights, in the probe's first window) is the one to differ from.
struct CrashOnReplica {
  void operator()(std::uint32_t, const ParamSet& p) const {
    static const float* shared = p.data(0);  // per process: each worker's first step
    if (p.data(0) != shared && test::shared_flag().exchange(1) == 0) std::abort();
  }
};

// The ridge model as --layout auto probes it: one weight per feature, on sparse rows
// (replicas_sound).
struct IndexedRidge : test::Ridge<CrashOnReplica> {
  bool feature_indexed() const noexcept override { return true; }
};

}  // namespace

TEST_CASE("a worker killed in a replica window of the probe is respawned; nothing counted twice") {
  const Dataset d = test::linear_data(8000).sparsified();
  test::shared_flag().store(0);
  IndexedRidge model;
  TrainConfig c;
  c.workers = 2;
  c.epochs = 400;  // a run of about a second: the probe's replica windows come early
  c.step_size.lr0 = 0.05f;
  const auto r = train(c, model, d, &d);
  CHECK(test::shared_flag().load() == 1);  // it did die on a replica
  CHECK(r.restarts == 1);
  // The respawned worker resumed from the place its predecessor last merged and
  // published: every row counted once.
  CHECK(r.samples == std::uint64_t{c.epochs} * d.rows());
  CHECK(r.layout.probed);
  CHECK(r.parameters.at("theta")[0] == doctest::Approx(2.0).epsilon(0.02));
  CHECK(r.parameters.at("theta")[1] == doctest::Approx(-1.0).epsilon(0.02));
}
