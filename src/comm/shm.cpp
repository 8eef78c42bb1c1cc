#include "comm/shm.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <new>

#include "hogwild/error.hpp"

namespace hogwild::detail {

// The region: this header, then two sets of slots, each a slot per rank and one
// for the chunk's sums.
struct ShmCommunicator::Header {
  struct alignas(64) Arrival {
    std::atomic<std::uint32_t> round{0};  // the last barrier this rank reached
  };
  alignas(64) std::atomic<std::uint64_t> arrivals{0};  // arrivals at all barriers so far
  alignas(64) std::atomic<std::uint32_t> round{0};     // barriers completed: what sleepers wait on
  std::atomic<std::uint32_t> sleepers{0};              // ranks in FUTEX_WAIT on `round`
  alignas(64) std::atomic<std::uint32_t> claimed{0};   // a rank is writing `why`
  std::atomic<std::uint32_t> aborted{0};               // 1 + the rank that aborted, once `why` is written
  char why[244] = {};
  std::uint32_t size = 0;
  Arrival arrived[kMaxRanks];
};

namespace {

using Clock = std::chrono::steady_clock;

std::size_t set_bytes(unsigned size) { return (size + 1) * ShmCommunicator::slot_bytes(size); }

// FUTEX_WAIT/WAKE without FUTEX_PRIVATE_FLAG: the word is shared between processes.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t seen, long timeout_ns) {
  timespec ts{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}
void futex_wake_all(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr,
          nullptr, 0);
}

void pause_cpu() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// memcpy of n bytes that may be 0, from or to the null data() of an empty vector
// (memcpy's arguments must be valid pointers even for 0 bytes).
void copy_bytes(void* to, const void* from, std::size_t n) noexcept {
  if (n) std::memcpy(to, from, n);
}

// The part of slice `s` that chunk offset c covers, at most `seg` elements.
Slice part(Slice s, std::size_t c, std::size_t seg) {
  const std::size_t begin = std::min(s.end, s.begin + c);
  return {begin, std::min(s.end, begin + seg)};
}

}  // namespace

std::size_t ShmCommunicator::region_bytes(unsigned size) {
  return sizeof(Header) + 2 * set_bytes(size);
}

void ShmCommunicator::prepare(std::span<std::byte> region, unsigned size) {
  HOGWILD_ENFORCE(size > 0 && size <= kMaxRanks, "a group of 1 to 256 ranks");
  HOGWILD_ENFORCE_LE(region_bytes(size), region.size());
  auto* h = new (region.data()) Header();
  h->size = size;
}

ShmCommunicator::ShmCommunicator(std::span<std::byte> region, unsigned rank, unsigned size,
                                 std::chrono::milliseconds timeout,
                                 const std::atomic<std::int32_t>* stop)
    : Communicator(timeout),
      header_(std::launder(reinterpret_cast<Header*>(region.data()))),
      base_(region.data() + sizeof(Header)), rank_(rank), size_(size), stop_(stop) {
  HOGWILD_ENFORCE(size > 0 && rank < size, "a rank outside its group");
  HOGWILD_ENFORCE_LE(region_bytes(size), region.size());
  HOGWILD_ENFORCE_EQ(header_->size, size);
}

std::byte* ShmCommunicator::slot(unsigned set, unsigned r) const {
  return base_ + set * set_bytes(size_) + r * slot_bytes(size_);
}

void ShmCommunicator::abort(std::string_view why) noexcept {
  std::uint32_t expected = 0;
  if (header_->claimed.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    const std::size_t n = std::min(why.size(), sizeof(header_->why) - 1);
    std::memcpy(header_->why, why.data(), n);
    header_->why[n] = '\0';
    header_->aborted.store(rank_ + 1, std::memory_order_release);
  }
  futex_wake_all(&header_->round);
}

void ShmCommunicator::fail(std::uint32_t target) const {
  if (const std::uint32_t a = header_->aborted.load(std::memory_order_acquire))
    throw CommError(fmt::format("rank {} of {} stopped: rank {} aborted the collectives: {}",
                                rank_, size_, a - 1, header_->why));
  std::vector<unsigned> late;
  for (unsigned r = 0; r < size_; ++r)
    if (static_cast<std::int32_t>(target - header_->arrived[r].round.load(
                                              std::memory_order_relaxed)) > 0)
      late.push_back(r);
  const std::string missing = fmt::format("{}", fmt::join(late, ", "));
  if (stop_ && stop_->load(std::memory_order_relaxed))
    throw CommError(fmt::format("rank {} of {} stopped: the run stopped while it waited for "
                                "rank {}", rank_, size_, missing));
  throw CommError(fmt::format("rank {} of {} waited {} ms for rank {} to reach the same "
                              "collective (shm); it is gone or stuck",
                              rank_, size_, timeout_.count(), missing),
                  std::move(late));
}

// Arrivals are counted for all barriers together: the last of the size ranks
// arriving at barrier t makes the count t * size and advances `round` (release:
// every rank's writes before the barrier are seen after it), waking the sleepers if
// there are any. The others spin on `round` a while, then sleep on it in naps of up
// to 1 ms, checking for an abort, the run's stop and the timeout.
void ShmCommunicator::barrier() {
  const std::uint64_t passed = round_ + 1;
  const auto target = static_cast<std::uint32_t>(passed);
  // A rank's mark of its arrival (what fail() reads to name the late ones) follows
  // its count, and the last one's follows the round it advanced: a rank stopped
  // between the two is then named. Marked first, a rank stopped before counting was
  // named by nobody ("waited for rank  to reach").
  if (header_->arrivals.fetch_add(1, std::memory_order_acq_rel) + 1 == passed * size_) {
    // seq_cst store, then load: a sleeper counted after this load has yet to enter
    // FUTEX_WAIT, which then finds the round changed and returns at once.
    header_->round.store(target, std::memory_order_seq_cst);
    header_->arrived[rank_].round.store(target, std::memory_order_relaxed);
    if (header_->sleepers.load(std::memory_order_seq_cst)) futex_wake_all(&header_->round);
  } else {
    header_->arrived[rank_].round.store(target, std::memory_order_relaxed);
    const auto deadline = Clock::now() + timeout_;
    long nap = 20000;
    for (int spin = 0;; ++spin) {
      const std::uint32_t now = header_->round.load(std::memory_order_acquire);
      if (now == target) break;
      if (spin < 2048) {
        pause_cpu();
        continue;
      }
      if (header_->aborted.load(std::memory_order_relaxed) ||
          (stop_ && stop_->load(std::memory_order_relaxed)) || Clock::now() > deadline)
        fail(target);
      header_->sleepers.fetch_add(1, std::memory_order_seq_cst);
      futex_wait(&header_->round, now, nap);
      header_->sleepers.fetch_sub(1, std::memory_order_relaxed);
      nap = std::min(nap * 2, 1000000L);
    }
  }
  round_ = passed;
}

template <class T>
void ShmCommunicator::reduce(std::span<T> data, Reduce op, bool gather_back) {
  if (size_ == 1) return;
  const std::size_t n = data.size();
  const std::size_t seg = slot_bytes(size_) / sizeof(T) / size_;  // per destination rank and chunk
  const std::size_t per = slice_of(n, 0, size_).size();
  const Slice own = slice_of(n, rank_, size_);
  for (std::size_t c = 0; c < per; c += seg) {
    T* mine = reinterpret_cast<T*>(slot(set_, rank_));
    for (unsigned d = 0; d < size_; ++d) {
      const Slice p = part(slice_of(n, d, size_), c, seg);
      copy_bytes(mine + d * seg, data.data() + p.begin, p.size() * sizeof(T));
    }
    barrier();  // every slot holds its rank's chunk
    if (gather_back && size_ == 2) {
      // Two ranks: each sums the whole chunk itself, in rank order (the same floats
      // on both), straight into its data: a pass over memory and a barrier fewer
      // than summing halves and copying them back.
      const T* a = reinterpret_cast<const T*>(slot(set_, 0));
      const T* b = reinterpret_cast<const T*>(slot(set_, 1));
      for (unsigned d = 0; d < size_; ++d) {
        const Slice q = part(slice_of(n, d, size_), c, seg);
        T* out = data.data() + q.begin;
        const std::size_t at = d * seg;
        if (op == Reduce::mean)
          for (std::size_t i = 0; i < q.size(); ++i) out[i] = (a[at + i] + b[at + i]) / T{2};
        else
          for (std::size_t i = 0; i < q.size(); ++i) out[i] = a[at + i] + b[at + i];
      }
      set_ ^= 1;
      continue;
    }
    // Segment rank_ summed over the slots in rank order: the same floats whichever
    // rank computes them.
    const Slice p = part(own, c, seg);
    T* out = gather_back ? reinterpret_cast<T*>(slot(set_, size_)) + rank_ * seg
                         : data.data() + p.begin;
    const T* first = reinterpret_cast<const T*>(slot(set_, 0)) + rank_ * seg;
    std::copy(first, first + p.size(), out);
    for (unsigned r = 1; r < size_; ++r) {
      const T* in = reinterpret_cast<const T*>(slot(set_, r)) + rank_ * seg;
      for (std::size_t i = 0; i < p.size(); ++i) out[i] += in[i];
    }
    if (op == Reduce::mean)
      for (std::size_t i = 0; i < p.size(); ++i) out[i] /= static_cast<T>(size_);
    if (gather_back) {
      barrier();  // every segment's sum is in place
      const T* sums = reinterpret_cast<const T*>(slot(set_, size_));
      for (unsigned d = 0; d < size_; ++d) {
        const Slice q = part(slice_of(n, d, size_), c, seg);
        copy_bytes(data.data() + q.begin, sums + d * seg, q.size() * sizeof(T));
      }
    }
    // The next chunk writes the other set. This one is written again two chunks on,
    // after a barrier that every rank reaches only once done reading it.
    set_ ^= 1;
  }
}

template <class T>
void ShmCommunicator::gather(std::span<T> data) {
  if (size_ == 1) return;
  const std::size_t n = data.size();
  const std::size_t seg = slot_bytes(size_) / sizeof(T);
  const std::size_t per = slice_of(n, 0, size_).size();
  for (std::size_t c = 0; c < per; c += seg) {
    const Slice p = part(slice_of(n, rank_, size_), c, seg);
    copy_bytes(slot(set_, rank_), data.data() + p.begin, p.size() * sizeof(T));
    barrier();
    for (unsigned d = 0; d < size_; ++d) {
      if (d == rank_) continue;
      const Slice q = part(slice_of(n, d, size_), c, seg);
      copy_bytes(data.data() + q.begin, slot(set_, d), q.size() * sizeof(T));
    }
    set_ ^= 1;
  }
}

std::vector<IndexValue> ShmCommunicator::all_gather(std::span<const IndexValue> mine) {
  if (size_ == 1) return {mine.begin(), mine.end()};
  const std::uint64_t count = mine.size();
  copy_bytes(slot(set_, rank_), &count, sizeof count);
  barrier();
  std::vector<std::size_t> counts(size_), offsets(size_ + 1, 0);
  for (unsigned d = 0; d < size_; ++d) {
    std::uint64_t k;
    copy_bytes(&k, slot(set_, d), sizeof k);
    counts[d] = k;
    offsets[d + 1] = offsets[d] + k;
  }
  set_ ^= 1;
  std::vector<IndexValue> all(offsets[size_]);
  const std::size_t cap = slot_bytes(size_) / sizeof(IndexValue);
  const std::size_t most = *std::max_element(counts.begin(), counts.end());
  for (std::size_t c = 0; c < most; c += cap) {
    const auto piece = [&](unsigned d) { return std::min(cap, counts[d] - std::min(counts[d], c)); };
    copy_bytes(slot(set_, rank_), mine.data() + std::min<std::size_t>(count, c),
                piece(rank_) * sizeof(IndexValue));
    barrier();
    for (unsigned d = 0; d < size_; ++d)
      copy_bytes(all.data() + offsets[d] + std::min(counts[d], c), slot(set_, d),
                  piece(d) * sizeof(IndexValue));
    set_ ^= 1;
  }
  return all;
}

void ShmCommunicator::broadcast(std::span<std::byte> data, unsigned root) {
  HOGWILD_ENFORCE_LT(root, size_);
  if (size_ == 1) return;
  const std::size_t chunk = slot_bytes(size_);
  for (std::size_t c = 0; c < data.size(); c += chunk) {
    const std::size_t len = std::min(chunk, data.size() - c);
    if (rank_ == root) copy_bytes(slot(set_, root), data.data() + c, len);
    barrier();
    if (rank_ != root) copy_bytes(data.data() + c, slot(set_, root), len);
    set_ ^= 1;
  }
}

}  // namespace hogwild::detail
