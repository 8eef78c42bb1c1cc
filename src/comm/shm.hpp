// The shared-memory Communicator: the ranks of one machine meet in a block of the
// run's arena. An all-reduce goes chunk by chunk: each rank copies its chunk into
// its slot, sums its own slice of the chunk over every slot (reduce-scatter, each
// rank reading N slots of 1/N of the chunk), and copies the whole sum back
// (all-gather); two sets of buffers alternate, so a chunk costs two barriers. A
// barrier spins briefly, then sleeps on a futex of the shared page (more ranks than
// cores must not spin each other out), and gives up when `abort` is set.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "hogwild/communicator.hpp"

namespace hogwild::detail {

class ShmCommunicator final : public Communicator {
 public:
  static constexpr std::size_t kChunkFloats = 1 << 16;  // 256 KiB per rank and set
  // Bytes of arena a group of `size` ranks needs.
  static std::size_t region_bytes(unsigned size);
  // Zeroes a region for `size` ranks; once, before any rank uses it.
  static void prepare(std::span<std::byte> region, unsigned size);

  // Rank `rank` of `size` on a prepared region (shared by all ranks). `abort`, when
  // set (the run's stop flag), makes a waiting rank throw instead of waiting on.
  ShmCommunicator(std::span<std::byte> region, unsigned rank, unsigned size,
                  const std::atomic<std::int32_t>* abort = nullptr);

  unsigned rank() const noexcept override { return rank_; }
  unsigned size() const noexcept override { return size_; }
  void all_reduce_sum(std::span<float> data) override;
  void barrier() override;

 private:
  float* slot(unsigned set, unsigned rank) const;
  float* sum(unsigned set) const;
  struct Header;
  Header* header_;
  std::byte* base_;
  unsigned rank_, size_;
  const std::atomic<std::int32_t>* abort_;
  std::uint32_t round_ = 0;  // barriers this rank has passed
  unsigned set_ = 0;         // the buffer set of the next chunk
};

}  // namespace hogwild::detail
