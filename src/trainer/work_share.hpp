// --balance steal: workers that finish early take rows from the slowest share.
//
// Hogwild's workers train their epochs with no barrier between them, so a worker
// that runs slower (a busy core, the parent's evaluation on a 2-core machine, a
// straggler) ends the run alone: on the 2-core AMD EPYC two workers on the
// RCV1-like set finished 3-25 % apart, and the run's examples/s is the slower
// one's. With stealing each worker still starts on its own share of each epoch,
// in its order, and claims it a grain (64 mini-batches) at a time. A worker that
// has finished every epoch takes the second half of the unclaimed grains of the
// share with the most left, trains them (with that epoch's step sizes), and looks
// again; so the tail of the run is shared and the workers end together.
//
// What a share's state is: one 64-bit word in its worker's record (WorkerProgress::
// share), changed only by compare-and-swap, so that a grain is claimed by exactly
// one worker and a crash at any instruction loses nothing:
//   - tag: which epoch the word is for (epoch_tag), 0 before the first;
//   - thief: the worker (+ 1) that holds a stolen range of it, 0 none; set by the
//     steal itself, so the range [limit, the thief's steal_end) is named where the
//     share is;
//   - claimed: grains the owner has taken, [0, claimed);
//   - limit: the owner's end; only a thief lowers it.
// The owner ends its epoch once claimed == limit and no thief holds a range (it
// waits for the thief), so an epoch counts as done only when all its rows are
// trained, and its loss includes the thieves' (WorkerProgress::stolen_loss).
// A respawned thief finds its steal by the word and continues from its record.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hogwild/trainer.hpp"

namespace hogwild::detail {

struct ShareWord {
  std::uint32_t tag = 0;      // 8 bits
  std::uint32_t thief = 0;    // 7 bits: worker + 1
  std::uint32_t claimed = 0;  // 24 bits, grains
  std::uint32_t limit = 0;    // 24 bits, grains
  static constexpr std::uint32_t kMaxGrains = (1u << 24) - 1;
  static constexpr unsigned kMaxWorkers = 127;
  std::uint64_t pack() const noexcept {
    return std::uint64_t{tag} << 56 | std::uint64_t{thief} << 49 | std::uint64_t{claimed} << 24 | limit;
  }
  static ShareWord unpack(std::uint64_t w) noexcept {
    return {static_cast<std::uint32_t>(w >> 56), static_cast<std::uint32_t>(w >> 49) & 0x7f,
            static_cast<std::uint32_t>(w >> 24) & kMaxGrains, static_cast<std::uint32_t>(w) & kMaxGrains};
  }
  bool operator==(const ShareWord&) const = default;
};

// Epoch e's tag: 1 to 255 (0 is a word never set).
constexpr std::uint32_t epoch_tag(unsigned e) noexcept { return e % 255 + 1; }
// Rows a grain: 64 mini-batches, as often as a worker publishes its place.
constexpr std::size_t grain_rows(std::size_t batch) noexcept { return 64 * (batch ? batch : 1); }
constexpr std::size_t grains_of(std::size_t rows, std::size_t grain) noexcept {
  return (rows + grain - 1) / grain;
}

// The owner's side, in the step loop. The end of the rows it has claimed:
inline std::size_t claimed_rows(const std::atomic<std::uint64_t>& share, std::size_t grain) noexcept {
  return std::size_t{ShareWord::unpack(share.load(std::memory_order_acquire)).claimed} * grain;
}
// Claims its next grain, unless a thief's limit comes first; returns the end of the
// rows it has claimed then (of n).
inline std::size_t claim_grain(std::atomic<std::uint64_t>& share, std::size_t grain,
                               std::size_t n) noexcept {
  std::uint64_t old = share.load(std::memory_order_acquire);
  for (;;) {
    ShareWord w = ShareWord::unpack(old);
    if (w.claimed >= w.limit) return std::min(n, std::size_t{w.claimed} * grain);
    ++w.claimed;
    if (share.compare_exchange_weak(old, w.pack(), std::memory_order_acq_rel, std::memory_order_acquire))
      return std::min(n, std::size_t{w.claimed} * grain);
  }
}
// The rows of earlier epochs that thieves took from a worker's shares (its `given`
// word, `given_word`), as they stand when it (re)starts epoch e of `rows` rows: a
// respawn of an epoch whose end it had counted leaves that epoch's out again.
inline std::uint64_t given_before(std::uint64_t given_word, std::uint64_t share_word, unsigned e,
                                  std::size_t rows, std::size_t grain) noexcept {
  std::uint64_t given = given_word >> 16;
  const ShareWord w = ShareWord::unpack(share_word);
  if ((given_word & 0xffff) == ((e + 1) & 0xffff) && w.tag == epoch_tag(e))
    given -= rows - std::min(rows, std::size_t{w.limit} * grain);
  return given;
}
// Which workers hold a stolen range now (holding[k]: worker k), for the parent's watch.
template <class Records>
std::vector<bool> thieves_holding(const Records& records) {
  std::vector<bool> holding(records.size(), false);
  for (const auto& p : records) {
    const std::uint32_t t = ShareWord::unpack(p.share.load(std::memory_order_acquire)).thief;
    if (t != 0 && t <= holding.size()) holding[t - 1] = true;
  }
  return holding;
}

// Why a run of these options cannot steal (and then trains static shares), or
// nothing where it steals: --balance static, a mode other than hogwild, one worker,
// more than 127, --partition contiguous (a worker keeps its slice, and its replica
// merges only the features of its slice), several nodes, --device cuda,
// --checkpoint or --resume (a checkpoint keeps each worker's place in its own share).
std::optional<std::string> no_steal(const TrainConfig& c, unsigned workers);

}  // namespace hogwild::detail
