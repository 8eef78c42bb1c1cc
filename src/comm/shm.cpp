#include "comm/shm.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <new>

#include "hogwild/error.hpp"

namespace hogwild::detail {

// The region: this header, then per buffer set one slot of kChunkFloats per rank
// and the chunk's sum.
struct alignas(128) ShmCommunicator::Header {
  std::atomic<std::uint32_t> arrived{0};  // ranks at the current barrier
  std::uint32_t pad0[31];
  std::atomic<std::uint32_t> round{0};    // barriers completed: what sleepers wait on
  std::uint32_t pad1[31];
  std::uint32_t size = 0;
};

namespace {

constexpr std::size_t kSlotBytes = ShmCommunicator::kChunkFloats * sizeof(float);

std::size_t set_bytes(unsigned size) { return (size + 1) * kSlotBytes; }

// FUTEX_WAIT/WAKE without FUTEX_PRIVATE_FLAG: the word is shared between processes.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t seen, long timeout_ns) {
  timespec ts{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}
void futex_wake_all(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr,
          nullptr, 0);
}

}  // namespace

std::size_t ShmCommunicator::region_bytes(unsigned size) {
  return sizeof(Header) + 2 * set_bytes(size);
}

void ShmCommunicator::prepare(std::span<std::byte> region, unsigned size) {
  HOGWILD_ENFORCE_LE(region_bytes(size), region.size());
  std::memset(region.data(), 0, sizeof(Header));
  auto* h = new (region.data()) Header();
  h->size = size;
}

ShmCommunicator::ShmCommunicator(std::span<std::byte> region, unsigned rank, unsigned size,
                                 const std::atomic<std::int32_t>* abort)
    : header_(std::launder(reinterpret_cast<Header*>(region.data()))),
      base_(region.data() + sizeof(Header)), rank_(rank), size_(size), abort_(abort) {
  HOGWILD_ENFORCE(size > 0 && rank < size, "a rank outside its group");
  HOGWILD_ENFORCE_LE(region_bytes(size), region.size());
  HOGWILD_ENFORCE_EQ(header_->size, size);
  round_ = header_->round.load(std::memory_order_acquire);
}

float* ShmCommunicator::slot(unsigned set, unsigned r) const {
  return reinterpret_cast<float*>(base_ + set * set_bytes(size_) + r * kSlotBytes);
}
float* ShmCommunicator::sum(unsigned set) const { return slot(set, size_); }

// A counting barrier: the last rank to arrive resets the count and advances the
// round (release: every rank's writes before the barrier are seen after it); the
// others spin on the round, then sleep on it in 1 ms naps, checking `abort`.
void ShmCommunicator::barrier() {
  const std::uint32_t target = round_ + 1;
  if (header_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    header_->arrived.store(0, std::memory_order_relaxed);
    header_->round.store(target, std::memory_order_release);
    futex_wake_all(&header_->round);
  } else {
    for (int spin = 0;; ++spin) {
      const std::uint32_t now = header_->round.load(std::memory_order_acquire);
      if (now == target) break;
      if (spin < 4096) continue;
      if (abort_ && abort_->load(std::memory_order_relaxed))
        throw Error(fmt::format("rank {} of {}: the run stopped while waiting for the other "
                                "ranks", rank_, size_), kExitWorkerFailed);
      futex_wait(&header_->round, now, 1000000);
    }
  }
  round_ = target;
}

void ShmCommunicator::all_reduce_sum(std::span<float> data) {
  if (size_ == 1) return;
  for (std::size_t begin = 0; begin < data.size(); begin += kChunkFloats) {
    const std::size_t n = std::min(kChunkFloats, data.size() - begin);
    float* mine = data.data() + begin;
    std::memcpy(slot(set_, rank_), mine, n * sizeof(float));
    barrier();  // every slot holds its rank's chunk
    // This rank's slice, summed in rank order (the same order for every slice, so
    // the result is one set of floats whoever computes it).
    const std::size_t per = (n + size_ - 1) / size_;
    const std::size_t lo = std::min(n, rank_ * per), hi = std::min(n, lo + per);
    float* out = sum(set_);
    if (lo < hi) {
      std::memcpy(out + lo, slot(set_, 0) + lo, (hi - lo) * sizeof(float));
      for (unsigned r = 1; r < size_; ++r) {
        const float* in = slot(set_, r);
        for (std::size_t i = lo; i < hi; ++i) out[i] += in[i];
      }
    }
    barrier();  // the whole chunk's sum is in place
    std::memcpy(mine, out, n * sizeof(float));
    set_ ^= 1;  // the next chunk's writes go to the other set, which every rank has
                // finished reading (it passed this chunk's first barrier after that)
  }
}

}  // namespace hogwild::detail
