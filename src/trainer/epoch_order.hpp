// The order in which the workers visit the training rows in an epoch, and which
// worker gets which rows: the sampling half of a run, apart from the step loop.
//
// Partition::shuffled (the default) draws one permutation of all rows per epoch
// from (seed, epoch) and gives worker k the positions [k n/W, (k+1) n/W) of it, as
// PyTorch's DistributedSampler does and as the Hogwild! paper's uniform sampling
// asks: every worker sees the whole data's mix, whatever order the file has. The
// permutation moves blocks of block_rows(n) consecutive rows (1 below 2048 rows, 64
// from 65536), and each worker then shuffles its own share row by row: a worker gets
// at least 1024/W random blocks, so a sorted file's classes mix in every share, and
// drawing the order costs what shuffling a contiguous slice does (a per-row keyed
// permutation cost 10-18 % of matrix factorisation's throughput). The block order
// is a Fisher-Yates draw up to kSmallRows blocks, past that a keyed bijection
// evaluated per block (RowPermutation), so nothing of size n is stored, and no
// worker computes more than its share. A respawned worker or a resumed run
// recomputes the same rows.
// Partition::contiguous gives worker k the rows [k n/W, (k+1) n/W) of the file,
// shuffled inside that slice with (seed, k, epoch): for locality experiments.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "hogwild/trainer.hpp"

namespace hogwild::detail {

// A pseudo-random permutation of [0, n), chosen by `key`: a six-round Feistel
// network on the smallest power-of-two domain holding n (halves of b/2 and b - b/2
// bits, so any b works), cycle-walked back into [0, n) — fewer than two passes of
// the network per position on average, since 2^b < 2n. About 16 ns a position.
class RowPermutation {
 public:
  RowPermutation(std::uint64_t n, std::uint64_t key) noexcept;
  std::uint64_t size() const noexcept { return n_; }
  std::uint64_t operator()(std::uint64_t position) const noexcept {
    std::uint64_t x = position;
    do x = network(x);
    while (x >= n_);
    return x;
  }

 private:
  std::uint64_t network(std::uint64_t x) const noexcept;
  std::uint64_t n_;
  unsigned high_bits_ = 0, low_bits_ = 0;
  std::uint64_t keys_[6] = {};
};

// The stream worker `rank` shuffles its share of epoch `epoch` with (either partition).
std::uint64_t epoch_seed(std::uint64_t seed, unsigned rank, unsigned epoch) noexcept;
// The key of epoch `epoch`'s permutation of all rows (the same for every worker).
std::uint64_t permutation_key(std::uint64_t seed, unsigned epoch) noexcept;

// Up to this many blocks the block order is drawn by Fisher-Yates (see above):
// a keyed network's halves are too narrow to mix well below it (4 rounds on 10
// items put item 0 first with chi-square 77, 9 degrees of freedom).
inline constexpr std::size_t kSmallRows = std::size_t{1} << 16;
// Consecutive rows that a shuffled epoch keeps together: n / 1024, from 1 to 64.
std::size_t block_rows(std::size_t rows) noexcept;

// Positions [begin, end) of an epoch's order that worker `rank` of `workers` owns
// (both partitions give every worker the same count of rows).
std::pair<std::size_t, std::size_t> share(std::size_t rows, unsigned workers,
                                          unsigned rank) noexcept;

// The rows worker `rank` visits in epoch `epoch`, in order, into `out` (resized to
// its share).
void epoch_rows(Partition partition, std::size_t rows, unsigned workers, unsigned rank,
                std::uint64_t seed, unsigned epoch, std::vector<std::uint32_t>& out);

}  // namespace hogwild::detail
