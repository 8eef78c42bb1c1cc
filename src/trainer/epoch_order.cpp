#include "trainer/epoch_order.hpp"

#include <algorithm>
#include <bit>
#include <numeric>

#include "hogwild/error.hpp"
#include "hogwild/rng.hpp"

namespace hogwild {

const char* to_string(Partition p) noexcept {
  return p == Partition::contiguous ? "contiguous" : "shuffled";
}

Partition parse_partition(const std::string& name) {
  if (name == "shuffled") return Partition::shuffled;
  if (name == "contiguous") return Partition::contiguous;
  throw ConfigError("--partition must be shuffled or contiguous, got \"" + name + "\"");
}

}  // namespace hogwild

namespace hogwild::detail {

RowPermutation::RowPermutation(std::uint64_t n, std::uint64_t key) noexcept : n_(n) {
  // At least two bits, so that both halves have one.
  const unsigned bits = std::max(2u, static_cast<unsigned>(std::bit_width(n > 0 ? n - 1 : 0)));
  high_bits_ = bits / 2;
  low_bits_ = bits - high_bits_;
  for (auto& k : keys_) k = splitmix64(key);
}

// Round r splits x into a high part L and a low part R and makes (R, L ^ F_r(R)):
// a bijection whatever F_r is. The halves trade sizes each round, so after an
// even number of rounds x is back in the original split.
std::uint64_t RowPermutation::network(std::uint64_t x) const noexcept {
  unsigned high = high_bits_, low = low_bits_;
  for (std::uint64_t k : keys_) {
    const std::uint64_t left = x >> low, right = x & ((std::uint64_t{1} << low) - 1);
    const std::uint64_t f = mix64(right ^ k) & ((std::uint64_t{1} << high) - 1);
    x = (right << high) | (left ^ f);
    std::swap(high, low);
  }
  return x;
}

std::uint64_t epoch_seed(std::uint64_t seed, unsigned rank, unsigned epoch) noexcept {
  std::uint64_t s = seed;
  std::uint64_t h = splitmix64(s);
  s = h ^ (static_cast<std::uint64_t>(rank) << 32 | epoch);
  return splitmix64(s);
}

std::uint64_t permutation_key(std::uint64_t seed, unsigned epoch) noexcept {
  std::uint64_t s = seed ^ 0x7065726d75746564ULL;  // apart from the contiguous streams
  std::uint64_t h = splitmix64(s);
  s = h ^ epoch;
  return splitmix64(s);
}

std::pair<std::size_t, std::size_t> share(std::size_t rows, unsigned workers,
                                          unsigned rank) noexcept {
  return {rows * rank / workers, rows * (rank + 1) / workers};
}

std::size_t block_rows(std::size_t rows) noexcept {
  return std::clamp<std::size_t>(rows / 1024, 1, 64);
}

namespace {

// Positions [begin, end) of the epoch's block order: the rows of block order[b]
// at positions [b B, (b+1) B) for each of the n / B whole blocks; the tail of
// fewer than B rows keeps its place at the end (n / B >= 1024 blocks mix around it).
template <class Order>
void block_positions(const Order& order, std::size_t rows, std::size_t begin, std::size_t end,
                     std::uint32_t* out) {
  const std::size_t width = block_rows(rows), whole = rows / width;
  for (std::size_t p = begin; p < end;) {
    const std::size_t b = p / width;
    if (b >= whole) {  // the tail
      for (; p < end; ++p) *out++ = static_cast<std::uint32_t>(p);
      return;
    }
    const std::size_t first = static_cast<std::size_t>(order(b)) * width + p % width;
    const std::size_t n = std::min(end - p, width - p % width);
    for (std::size_t i = 0; i < n; ++i) *out++ = static_cast<std::uint32_t>(first + i);
    p += n;
  }
}

}  // namespace

void epoch_rows(Partition partition, std::size_t rows, unsigned workers, unsigned rank,
                std::uint64_t seed, unsigned epoch, std::vector<std::uint32_t>& out) {
  HOGWILD_ENFORCE_LT(rank, workers);
  const auto [begin, end] = share(rows, workers, rank);
  out.resize(end - begin);
  if (partition == Partition::contiguous) {
    std::iota(out.begin(), out.end(), static_cast<std::uint32_t>(begin));
  } else if (const std::size_t blocks = rows / block_rows(rows); blocks <= kSmallRows) {
    std::vector<std::uint32_t> order(blocks);
    std::iota(order.begin(), order.end(), 0u);
    Rng(permutation_key(seed, epoch)).shuffle(std::span<std::uint32_t>(order));
    block_positions([&](std::size_t b) { return order[b]; }, rows, begin, end, out.data());
  } else {
    block_positions(RowPermutation(blocks, permutation_key(seed, epoch)), rows, begin, end,
                    out.data());
  }
  // The worker's own order: its rows shuffled one by one.
  Rng(epoch_seed(seed, rank, epoch)).shuffle(std::span<std::uint32_t>(out));
}

}  // namespace hogwild::detail
