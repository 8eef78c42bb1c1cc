// The shared-memory ring (comm/ring.hpp): records come out whole and in order, a
// full ring refuses rather than overwrites, records wrap at the end, and a producer
// and a consumer in two processes pass 200,000 records of every length through a
// small ring with nothing lost, reordered or torn.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "comm/ring.hpp"
#include "hogwild/error.hpp"
#include "hogwild/rng.hpp"
#include "support.hpp"

using namespace hogwild;
using namespace hogwild::detail;

namespace {

// A prepared ring's region in shared memory.
struct Region : test::SharedBytes {
  explicit Region(std::size_t capacity) : SharedBytes(ShmRing::region_bytes(capacity)) {
    ShmRing::prepare(bytes, capacity);
  }
};

std::span<const std::byte> as_bytes(const std::vector<std::uint8_t>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size()};
}

// Record k's payload: its length from k, its bytes from k and their place.
std::vector<std::uint8_t> payload(std::uint64_t k, std::size_t max) {
  std::vector<std::uint8_t> v((k * 2654435761u) % (max + 1));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(k * 31 + i * 7);
  return v;
}

}  // namespace

TEST_CASE("records come out whole, in order; a full ring refuses; records wrap at the end") {
  Region r(256);
  ShmRing ring(r.bytes);
  CHECK(ring.max_payload() == 56);
  ShmRing::Record rec;
  CHECK_FALSE(ring.try_peek(rec));
  const std::vector<std::uint8_t> a(40, 1), b(13, 2);
  // Payloads of 40 to 43 bytes: records of 48, 56, 56 and 56 bytes (an 8-byte
  // header, the payload padded to 8); a fifth of 48 does not fit in 256.
  for (int i = 0; i < 4; ++i) CHECK(ring.try_push(7, as_bytes(a), as_bytes(b).first(i)));
  CHECK_FALSE(ring.try_push(7, as_bytes(a)));
  CHECK(ring.used() == 48 + 3 * 56);
  for (int i = 0; i < 4; ++i) {
    REQUIRE(ring.try_peek(rec));
    CHECK(rec.kind == 7);
    REQUIRE(rec.payload.size() == 40u + i);
    CHECK(std::memcmp(rec.payload.data(), a.data(), 40) == 0);
    ring.pop();
  }
  CHECK(ring.used() == 0);
  // Now at offset 216 of 256: a 56-byte record wraps, after a pad of 40.
  const std::vector<std::uint8_t> c(48, 3);
  CHECK(ring.try_push(9, as_bytes(c)));
  CHECK(ring.used() == 40 + 56);
  REQUIRE(ring.try_peek(rec));
  CHECK(rec.kind == 9);
  CHECK(rec.payload.size() == 48);
  CHECK(rec.payload.data() == r.bytes.data() + sizeof(ShmRing::Header) + 8);  // at offset 0
  ring.pop();
  CHECK(ring.used() == 0);
  CHECK_THROWS_AS(ring.try_push(1, as_bytes(std::vector<std::uint8_t>(57))), Error);
  CHECK_THROWS_AS(ring.try_push(ShmRing::kPadKind, as_bytes(a)), Error);
  CHECK_THROWS_AS(ShmRing::prepare(r.bytes, 100), Error);
}

TEST_CASE("a producer and a consumer in two processes pass 200,000 records intact") {
  constexpr std::uint64_t kRecords = 200000;
  Region r(4096);
  const std::size_t max = ShmRing(r.bytes).max_payload();
  const pid_t producer = test::fork_child([&] {
    ShmRing ring(r.bytes);
    for (std::uint64_t k = 0; k < kRecords; ++k) {
      const auto v = payload(k, max - 8);
      const std::span<const std::byte> seq(reinterpret_cast<const std::byte*>(&k), 8);
      // Each side yields while it waits: on a loaded 2-core machine a spinning side
      // held its core for whole time slices while the other waited for one (a
      // 4-second test ran past its 120 s beside a sanitizer build).
      while (!ring.try_push(static_cast<std::uint32_t>(k % 5), seq, as_bytes(v)))
        std::this_thread::yield();
    }
    return 0;
  });
  ShmRing ring(r.bytes);
  std::uint64_t bad = 0, full_waits = 0;
  for (std::uint64_t k = 0; k < kRecords; ++k) {
    ShmRing::Record rec;
    while (!ring.try_peek(rec)) {
      ++full_waits;
      std::this_thread::yield();
    }
    std::uint64_t seq = 0;
    std::memcpy(&seq, rec.payload.data(), 8);
    const auto v = payload(k, max - 8);
    if (seq != k || rec.kind != k % 5 || rec.payload.size() != 8 + v.size() ||
        (!v.empty() && std::memcmp(rec.payload.data() + 8, v.data(), v.size()) != 0))
      ++bad;
    ring.pop();
  }
  CHECK(bad == 0);
  CHECK(test::wait_exit(producer, 120) == 0);
  CHECK(ring.used() == 0);
  MESSAGE("consumer found the ring empty " << full_waits << " times");
}
