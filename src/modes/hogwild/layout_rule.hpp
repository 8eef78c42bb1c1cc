// The layout probe's schedule and its rule (layout_probe.hpp runs the probe): how
// long its windows are and how many, and which layout its figures choose. Functions
// of constants and figures alone, so that a decision follows from its figures
// (tests/test_layout.cpp injects them).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "hogwild/trainer.hpp"

namespace hogwild::detail {

// Replicas win when an example on them costs at most this much of one on the shared
// weights: in a close call, replicas. What plain costs where cores contend for the
// hot lines moves with the machine's phase, which a probe of 90 ms cannot foresee
// (plain spread from 0.49 to 1.00 of the ceiling over 5 repetitions of one bench on
// RCV1-like, replicas from 0.83 to 1.02), while a replica's merges cost about 5 % by
// --merge-every auto's rule whatever the phase. Where the probe measured the two
// within 10 %, whole runs had replicas 1.09x plain (RCV1-like) and 0.97x-1.01x
// (Fashion-MNIST softmax), each inside plain's accuracy band; where merges cost more
// than they save (SpamAssassin, the ratings: 1.44x-1.92x) the probe is nowhere near
// the bar. (Before the probe left out its warm windows a bar of 0.9x absorbed their
// noise, and chose plain in 6 of 12 RCV1-like runs that replicas then beat by 12 %,
// median.)
inline constexpr double kReplicaWins = 1.1;
// Hot coordinates are weighed as replicas are (their private copy is smaller and
// flushed more often, so they are the less stale of the two): a private layout wins
// at kReplicaWins of plain's cost or less, and of the two the cheaper, hot on a tie.
// (The figures' weights: plain's shared_ns, the others' ns / kReplicaWins.)
// 10 ms windows, 2 warm and 3 of each phase: about 90 ms from the start (50 ms on a
// clear call, below), a small part of most runs worth a second worker (the layouts
// bench's RCV1-like runs take 0.5 s; its SpamAssassin runs, 0.1-0.2 s, are the
// exception), and 3 windows of each phase from each of two workers, some 10,000
// examples each.
inline constexpr std::uint64_t kWindowNs = 10'000'000;
// Where each worker's share of the run is under kShortRun examples (under about
// half a second), the windows are kShortWindowNs: its measured windows
// then take 15-45 ms, not 30-90 ms (the warm ones stay at kWarmNs), of a run where
// they would cost the most. A shorter window is a noisier
// figure, so longer runs keep kWindowNs. Two workers, interleaved pairs on the 2-core
// Xeon, 5 ms windows against 10 ms: on SpamAssassin (60 epochs of 4,810 rows, 0.2 s;
// 144k examples a worker) auto ran 1.04x (16 pairs), 0.986x forced hot against
// 0.907x; on RCV1-like (3 epochs of 500k rows, 750k a worker) 0.925x (8 pairs).
inline constexpr std::uint64_t kShortWindowNs = 5'000'000;
inline constexpr std::uint64_t kShortRun = 500'000;
// The probe's window for a run of `epochs` over `rows` among `workers`.
constexpr std::uint64_t probe_window_ns(std::uint64_t epochs, std::uint64_t rows, unsigned workers) {
  return epochs * rows < kShortRun * std::max(workers, 1u) ? kShortWindowNs : kWindowNs;
}
// The windows first, on a private copy, not measured: kWarmNs of them, whatever
// their length. A worker's first milliseconds run cold, the second worker's more
// (forked later, and sharing its core with the parent, whose evaluations at every
// epoch's end take its caches: 3-14x the first worker's cost an example in its
// first 5 ms windows on SpamAssassin), and a slow partner makes the shared weights
// look uncontended. Windows of 10 ms had two warm ones; windows of 5 ms with two
// chose plain on SpamAssassin in 7 of 60 default runs (and replicas in 2), where
// with four, all but the first on the hot window (LayoutProbe::warm), the figures
// in CPU time (layout_probe.cpp, cpu_now), pooled over workers that measured every
// phase (pooled_figures) and plain never a clear call (kClearCall), none of 60 did
// (interleaved, bench/layout_ab.py: 1.036x median). Warm windows cost little: a
// private copy is what the probe chooses where it pays.
inline constexpr std::uint64_t kWarmNs = 20'000'000;
constexpr unsigned warm_windows(std::uint64_t window_ns) {
  return static_cast<unsigned>(std::max<std::uint64_t>(1, kWarmNs / window_ns));
}
inline constexpr unsigned kPairs = 3;        // windows of each phase a worker measures
inline constexpr unsigned kWaitWindows = 4;  // then how long it waits for the others
inline constexpr unsigned kMaxWindows = 8 * kPairs;  // the probe's longest, measured or not
// What the probe takes at least when it measures `pairs` windows of each of its
// `kinds` phases, for the lines that say so: the partial window it starts in, the
// warm ones, and the measured ones.
constexpr std::uint64_t probe_ms(unsigned pairs, unsigned kinds = 2, std::uint64_t window_ns = kWindowNs) {
  return (warm_windows(window_ns) + kinds * pairs + 1) * window_ns / 1'000'000;
}
inline constexpr unsigned kMaxWorkers = 4;   // past it: plain, no probe (see above)
// What the probe measured, pooled over the workers that published figures.
struct ProbeFigures {
  double shared_ns = 0;   // an example, straight to the shared weights (median window)
  double replica_ns = 0;  // an example on a replica, its reloads and merges included
  unsigned windows = 0;   // windows measured in all (each worker's, every phase)
  double hot_ns = 0;      // an example with hot coordinates, flushes included (0: not a choice)
  std::uint64_t window_ns = kWindowNs;  // the windows' length (probe_window_ns)
};

struct LayoutDecision {
  WeightLayout layout = WeightLayout::plain;
  std::string why;  // the figures and the rule, for the summary
};

// A clear call ends the probe after its first measured window of each phase:
// replicas at kReplicaWins / kClearCall of plain's cost or less (never plain:
// below). The probe's windows on the shared weights cost
// what plain loses, so the probe costs most where the call is clearest: on
// RCV1-like, with the cores contending (plain at 0.38 of the ceiling), the probe
// measured replicas at 0.35x-0.47x and auto ran at 0.946x forced replicas (30
// interleaved pairs); with the early end, the warm windows on the replica and the
// wait looked at every clock read, 0.987x (30 more). A window the VM took the core from
// for a while can make a close call look clear (either layout is then about as
// fast), but a clear one the other way only off by 1.5x^2 in both workers' figures,
// pooled. Only the first pair decides early: later, a phase's median of two windows
// is their mean, and one slow window would move it.
// With three phases: the cheapest by the weights above at kClearCall of every
// other's or less. Where two of three stay within it, the third is ruled out
// after the first window of each and the probe measures only those two after:
// on SpamAssassin plain (2.4x hot's weight) then costs one window of 10 ms, not
// three, while hot and replicas take their kPairs each where their first windows
// were within 1.5x. The first worker to have one window of each rules them out
// for the run, from the next window of the clock (record 0's run_live), so every
// worker's windows follow one cycle; the pooled figures still hold every worker's
// first window of a phase ruled out, which the rule weighs with the rest.
// Plain is never a clear call: where it is the cheapest after one window of each,
// the cheaper private layout is measured its kPairs windows beside it. The two
// mistakes do not cost alike: a private layout where plain would do costs a few
// per cent (SpamAssassin uncontended: forced hot at 0.94x plain), plain where the
// cores contend up to half the run (SpamAssassin: plain at 0.51 of the ceiling,
// hot at 0.91; RCV1-like: plain 0.44, replicas 0.92). And one slow window of a
// private phase (a worker's cold start, its core shared a while) made plain look
// clear: run beside another job, a default run on SpamAssassin chose plain on one
// window of each, 3645 ns shared against 8717 ns hot.
inline constexpr double kClearCall = 1.5;
bool clear_call(const ProbeFigures& f) noexcept;
// The phases still in the running on these figures (bit 0 shared, 1 replica, 2
// hot): the cheapest and those under kClearCall times its weight, and with plain
// the cheapest, the cheaper private layout too; every phase where the shared or
// replica phase was not measured, and hot where it was not.
unsigned contenders(const ProbeFigures& f) noexcept;

// The probe's rule: a function of its figures alone. Plain unless the shared and
// the replica phases were measured; then the cheapest by the weights above
// (kReplicaWins), hot among them where it was measured.
LayoutDecision choose_layout(const ProbeFigures& f);

// A layout as the progress records hold it: 1 + WeightLayout (0: none yet).
constexpr std::uint32_t layout_code(WeightLayout l) noexcept { return 1 + static_cast<std::uint32_t>(l); }
// A figure measured: positive and finite.
inline bool positive(double ns) noexcept { return ns > 0 && std::isfinite(ns); }

}  // namespace hogwild::detail
