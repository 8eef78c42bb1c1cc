#include "comm/ring.hpp"

#include <cstring>
#include <fmt/format.h>
#include <new>

#include "hogwild/error.hpp"

namespace hogwild::detail {

namespace {

constexpr std::size_t kRecordHeader = 8;

std::size_t padded(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

}  // namespace

std::size_t ShmRing::region_bytes(std::size_t capacity) { return sizeof(Header) + capacity; }

void ShmRing::prepare(std::span<std::byte> region, std::size_t capacity) {
  if (capacity < 64 || (capacity & (capacity - 1)) != 0)
    throw Error(fmt::format("a ring's capacity must be a power of two of at least 64 bytes, "
                            "not {}", capacity));
  HOGWILD_ENFORCE_LE(region_bytes(capacity), region.size());
  auto* h = new (region.data()) Header;
  h->capacity = capacity;
}

ShmRing::ShmRing(std::span<std::byte> region)
    : h_(reinterpret_cast<Header*>(region.data())),
      data_(region.data() + sizeof(Header)),
      capacity_(h_->capacity) {
  HOGWILD_ENFORCE_LE(region_bytes(capacity_), region.size());
}

std::size_t ShmRing::used() const noexcept {
  return h_->tail.load(std::memory_order_acquire) - h_->head.load(std::memory_order_acquire);
}

bool ShmRing::try_push(std::uint32_t kind, std::span<const std::byte> a,
                       std::span<const std::byte> b) {
  const std::size_t payload = a.size() + b.size();
  if (payload > max_payload())
    throw Error(fmt::format("a ring record of {} bytes is larger than the ring allows ({})",
                            payload, max_payload()));
  if (kind == kPadKind) throw Error("a ring record may not have the pad kind");
  const std::size_t need = kRecordHeader + padded(payload);
  const std::uint64_t tail = h_->tail.load(std::memory_order_relaxed);  // ours alone
  const std::uint64_t head = h_->head.load(std::memory_order_acquire);
  std::size_t at = tail & (capacity_ - 1);
  const std::size_t to_end = capacity_ - at;
  const std::size_t pad = need > to_end ? to_end : 0;  // the record starts again at 0
  if (capacity_ - (tail - head) < pad + need) return false;
  if (pad) {
    const std::uint32_t words[2] = {static_cast<std::uint32_t>(to_end - kRecordHeader), kPadKind};
    std::memcpy(data_ + at, words, sizeof words);
    at = 0;
  }
  const std::uint32_t words[2] = {static_cast<std::uint32_t>(payload), kind};
  std::memcpy(data_ + at, words, sizeof words);
  if (!a.empty()) std::memcpy(data_ + at + kRecordHeader, a.data(), a.size());
  if (!b.empty()) std::memcpy(data_ + at + kRecordHeader + a.size(), b.data(), b.size());
  h_->tail.store(tail + pad + need, std::memory_order_release);  // the record, published
  return true;
}

bool ShmRing::try_peek(Record& out) {
  const std::uint64_t head = h_->head.load(std::memory_order_relaxed);  // ours alone
  const std::uint64_t tail = h_->tail.load(std::memory_order_acquire);
  if (head == tail) return false;
  std::size_t at = head & (capacity_ - 1);
  std::uint32_t words[2];
  std::memcpy(words, data_ + at, sizeof words);
  std::size_t skip = 0;
  if (words[1] == kPadKind) {  // the producer wrapped: the record is at 0
    skip = capacity_ - at;
    HOGWILD_ENFORCE_LT(head + skip, tail);
    at = 0;
    std::memcpy(words, data_, sizeof words);
  }
  out.kind = words[1];
  out.payload = {data_ + at + kRecordHeader, words[0]};
  peeked_ = skip + kRecordHeader + padded(words[0]);
  return true;
}

void ShmRing::pop() {
  HOGWILD_ENFORCE(peeked_ > 0, "pop() without a record from try_peek()");
  h_->head.store(h_->head.load(std::memory_order_relaxed) + peeked_, std::memory_order_release);
  peeked_ = 0;
}

}  // namespace hogwild::detail
