// The Communicator: how the ranks of a synchronous run (--mode ddp, the node
// leaders of hogwild across nodes, a parameter server) add up and share what they
// computed. One interface, one backend per transport: shared memory on one machine
// (src/comm/shm.cpp), Gloo over TCP across machines (src/comm/gloo.cpp), NCCL across
// GPUs. Every rank calls the same collectives in the same order; each returns the
// same values, bit for bit, on every rank (the backends fix their summation order).
//
// No collective waits for ever: a peer that is gone, a rank that called abort(), or
// a wait longer than the communicator's timeout makes it throw CommError, naming the
// rank (and node) it waited for.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hogwild/error.hpp"

namespace hogwild {

// A collective failed: a peer died or aborted, the run stopped, or the timeout
// passed. Exit status 3, as a dead worker.
class CommError : public Error {
 public:
  explicit CommError(const std::string& what, std::vector<unsigned> waited_for = {})
      : Error(what, kExitWorkerFailed), waited_for(std::move(waited_for)) {}
  // The ranks of the group that a collective waited for until the timeout, where the
  // backend knows them (shared memory): gone, or stopped, traced or stuck.
  std::vector<unsigned> waited_for;
};

// A peer on another machine did not answer within the timeout, or could not be
// connected to, over the network: a cut link, a node that is down or stuck. A
// restart of the group would wait for it again, so the run ends (exit 3).
class PeerUnreachable : public CommError {
 public:
  using CommError::CommError;
};

enum class Reduce : std::uint8_t { sum, mean };

// One coordinate of a sparse gradient.
struct IndexValue {
  std::uint32_t index;
  float value;
  friend bool operator==(const IndexValue&, const IndexValue&) = default;
};

// The part of n elements that rank `rank` of `size` owns in reduce_scatter and
// all_gather: [begin, end), ceil(n / size) elements each, the last ranks' shorter
// or empty.
struct Slice {
  std::size_t begin = 0, end = 0;
  std::size_t size() const noexcept { return end - begin; }
};
constexpr Slice slice_of(std::size_t n, unsigned rank, unsigned size) noexcept {
  const std::size_t per = size ? (n + size - 1) / size : n;
  const std::size_t begin = std::min(n, rank * per);
  return {begin, std::min(n, begin + per)};
}

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual unsigned rank() const noexcept = 0;
  virtual unsigned size() const noexcept = 0;
  // "shm", "gloo", ...
  virtual std::string_view backend() const noexcept = 0;

  // In place: every rank's data becomes the element-wise sum (or mean) over ranks.
  virtual void all_reduce(std::span<float> data, Reduce op = Reduce::sum) = 0;
  virtual void all_reduce(std::span<double> data, Reduce op = Reduce::sum) = 0;
  // In place: afterwards data[slice_of(n, rank(), size())] holds the sum over
  // ranks of that slice; the rest of data is unspecified.
  virtual void reduce_scatter(std::span<float> data) = 0;
  virtual void reduce_scatter(std::span<double> data) = 0;
  // In place: each rank's slice of data (slice_of) is copied to every rank.
  virtual void all_gather(std::span<float> data) = 0;
  virtual void all_gather(std::span<double> data) = 0;
  // Every rank's list (lengths may differ), concatenated in rank order.
  virtual std::vector<IndexValue> all_gather(std::span<const IndexValue> mine) = 0;
  // root's bytes to every rank.
  virtual void broadcast(std::span<std::byte> data, unsigned root) = 0;
  // Returns when every rank has called it.
  virtual void barrier() = 0;
  // Every rank sends outgoing[r] (any length; outgoing[rank()] is ignored) to each
  // other rank r and gets back what each sent it, in rank order: a parameter
  // server's round across nodes. Gloo does it with point-to-point sends and
  // any-source receives (whichever peer's message comes first is taken first); the
  // backends without point-to-point messages throw ConfigError.
  virtual std::vector<std::vector<std::byte>> exchange(
      const std::vector<std::vector<std::byte>>& outgoing);
  // Makes every rank's collectives, now and later, throw CommError saying that this
  // rank aborted and why (from any thread of this rank; not from a signal handler).
  virtual void abort(std::string_view why) noexcept = 0;

  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 protected:
  explicit Communicator(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  std::chrono::milliseconds timeout_;
};

}  // namespace hogwild
