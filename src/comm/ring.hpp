// A single-producer, single-consumer ring of variable-length records in shared
// memory: how the parameter server's replicas and servers talk on one machine
// (a ring per replica and server, in the run's arena; no sockets). The producer
// appends records, the consumer reads them in order, each in one piece.
//
// Layout: a header (the consumer's and the producer's positions, each on its own
// 128-byte line) and `capacity` bytes of records. A record is an 8-byte header
// (its payload's length, a kind chosen by the caller) and the payload, padded to
// 8 bytes; one that would cross the end is preceded by a pad record filling the
// rest, so it starts again at offset 0. Positions only grow (64-bit byte counts):
// used = tail - head. The producer publishes a record with a release store of the
// tail after writing it; the consumer frees it with a release store of the head
// after reading it: each side's acquire load of the other's position orders the
// bytes (no word of a record is read while it is written).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace hogwild::detail {

class ShmRing {
 public:
  static constexpr std::uint32_t kPadKind = 0xffffffffu;
  struct Header {
    alignas(128) std::atomic<std::uint64_t> head{0};  // consumer: bytes consumed
    alignas(128) std::atomic<std::uint64_t> tail{0};  // producer: bytes published
    alignas(128) std::uint64_t capacity = 0;
  };
  // Bytes of shared memory a ring of `capacity` bytes (a power of two, at least 64)
  // needs.
  static std::size_t region_bytes(std::size_t capacity);
  // Makes a region ready; once, before either side uses it.
  static void prepare(std::span<std::byte> region, std::size_t capacity);

  explicit ShmRing(std::span<std::byte> region);

  // The largest payload a record may have (a quarter of the capacity).
  std::size_t max_payload() const noexcept { return capacity_ / 4 - 8; }

  // Producer: appends a record of kind `kind` whose payload is a then b (b may be
  // empty). False, writing nothing, when the ring has no room now. Throws Error
  // for a payload above max_payload() or the pad kind.
  bool try_push(std::uint32_t kind, std::span<const std::byte> a,
                std::span<const std::byte> b = {});

  struct Record {
    std::uint32_t kind = 0;
    std::span<const std::byte> payload;  // valid until pop()
  };
  // Consumer: the oldest record, or false when the ring is empty. Its bytes stay
  // valid (and the producer cannot reuse them) until pop().
  bool try_peek(Record& out);
  // Consumer: frees the record try_peek returned.
  void pop();

  // Bytes published and not yet consumed.
  std::size_t used() const noexcept;
  // Consumer: the position of the oldest record (bytes consumed so far). Positions
  // only grow, so it names a record for good.
  std::uint64_t head() const noexcept { return h_->head.load(std::memory_order_relaxed); }

 private:
  Header* h_;
  std::byte* data_;
  std::size_t capacity_;
  std::size_t peeked_ = 0;  // consumer: the bytes pop() will free
};

}  // namespace hogwild::detail
