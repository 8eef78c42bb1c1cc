// The shared-memory Communicator: the ranks of one machine meet in a region of the
// run's arena. Every collective goes through per-rank slots, chunk by chunk: an
// all-reduce writes each rank's chunk, parted into one segment per rank, into the
// rank's slot; rank r then sums segment r over every slot in rank order (the
// reduce-scatter: each rank reads 1/N of each slot) and, after a barrier, every rank
// copies all the sums back (the all-gather). Two sets of slots alternate, so a rank
// writes the next chunk while a slower one still reads the last. A barrier spins
// briefly, then sleeps on a futex of the shared page: more ranks than cores must not
// spin each other out, and libstdc++'s std::atomic::wait does not wake another
// process. A waiting rank gives up (CommError) when a rank aborts, when the run's
// stop flag is set, or after the timeout, naming the ranks it waited for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/communicator.hpp"

namespace hogwild::detail {

class ShmCommunicator final : public Communicator {
 public:
  // Bytes of a rank's slot in each set: large enough that a chunk's barrier costs
  // little against its copy, small enough that both sets stay in cache and the
  // region stays small with many ranks. (2 ranks, 64 MiB all-reduce, AMD EPYC: 9.0
  // ms with 1 MiB slots against 9.9 ms with 256 KiB, interleaved runs.)
  static constexpr std::size_t slot_bytes(unsigned size) noexcept {
    return size <= 2 ? std::size_t{1} << 20 : size <= 4 ? std::size_t{512} << 10
                                                        : std::size_t{256} << 10;
  }
  static constexpr unsigned kMaxRanks = 256;
  // Bytes of arena a group of `size` ranks needs.
  static std::size_t region_bytes(unsigned size);
  // Makes a region ready for `size` ranks; once, before any rank uses it.
  static void prepare(std::span<std::byte> region, unsigned size);

  // Rank `rank` of `size` on a prepared region shared by all ranks (a fresh one per
  // group: every rank starts at its first barrier). `stop`, when
  // set (the run's stop flag), makes a waiting rank throw instead of waiting on.
  ShmCommunicator(std::span<std::byte> region, unsigned rank, unsigned size,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10),
                  const std::atomic<std::int32_t>* stop = nullptr);

  unsigned rank() const noexcept override { return rank_; }
  unsigned size() const noexcept override { return size_; }
  std::string_view backend() const noexcept override { return "shm"; }
  void all_reduce(std::span<float> data, Reduce op = Reduce::sum) override { reduce<float>(data, op, true); }
  void all_reduce(std::span<double> data, Reduce op = Reduce::sum) override { reduce<double>(data, op, true); }
  void reduce_scatter(std::span<float> data) override { reduce<float>(data, Reduce::sum, false); }
  void reduce_scatter(std::span<double> data) override { reduce<double>(data, Reduce::sum, false); }
  void all_gather(std::span<float> data) override { gather<float>(data); }
  void all_gather(std::span<double> data) override { gather<double>(data); }
  std::vector<IndexValue> all_gather(std::span<const IndexValue> mine) override;
  void broadcast(std::span<std::byte> data, unsigned root) override;
  void barrier() override;
  void abort(std::string_view why) noexcept override;

 private:
  struct Header;
  template <class T>
  void reduce(std::span<T> data, Reduce op, bool gather_back);
  template <class T>
  void gather(std::span<T> data);
  std::byte* slot(unsigned set, unsigned r) const;  // r == size_: the set's sums
  [[noreturn]] void fail(std::uint32_t target) const;

  Header* header_;
  std::byte* base_;
  unsigned rank_, size_;
  const std::atomic<std::int32_t>* stop_;
  std::uint64_t round_ = 0;  // barriers this rank has passed (every rank starts at 0)
  unsigned set_ = 0;         // the slot set of the next chunk
};

}  // namespace hogwild::detail
