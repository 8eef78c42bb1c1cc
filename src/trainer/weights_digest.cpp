#include "trainer/weights_digest.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "hogwild/error.hpp"
#include "hogwild/memory_space.hpp"

namespace hogwild::detail {

namespace {

static_assert(std::endian::native == std::endian::little,
              "the digest's bytes are little-endian: a big-endian host must swap them");

// An OpenSSL digest context, freed however the digest ends.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw ResourceError("weights_sha256: OpenSSL could not start a SHA-256 digest");
  }
  void add(const void* p, std::size_t n) {
    if (n && EVP_DigestUpdate(ctx_.get(), p, n) != 1)
      throw ResourceError("weights_sha256: OpenSSL's SHA-256 update failed");
  }
  // The header of one tensor: its name, a zero byte, its count (u64, little-endian).
  void tensor(const std::string& name, std::uint64_t count) {
    add(name.data(), name.size() + 1);  // with the string's terminating zero
    add(&count, sizeof count);
  }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), md.data(), &n) != 1)
      throw ResourceError("weights_sha256: OpenSSL's SHA-256 could not finish");
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) {
      out += digits[md[i] >> 4];
      out += digits[md[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

}  // namespace

std::string weights_sha256(const ParamSet& params) {
  std::vector<const ParamSet::Tensor*> order;
  for (const auto& t : params.tensors()) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  Sha256 sha;
  std::vector<float> block;
  for (const auto* t : order) {
    sha.tensor(t->name, t->size);
    if (t->space != MemorySpace::device && t->dtype == Dtype::f32) {
      sha.add(t->data, t->size * sizeof(float));  // nothing writes now: read in place
      continue;
    }
    // Device memory or halves: widened to floats a block at a time.
    constexpr std::size_t kBlock = 1 << 16;
    for (std::size_t at = 0; at < t->size; at += kBlock) {
      const std::size_t n = std::min(kBlock, t->size - at);
      block.resize(n);
      read_values(t->space, t->dtype, t->data, at, n, block.data());
      sha.add(block.data(), n * sizeof(float));
    }
  }
  return sha.hex();
}

}  // namespace hogwild::detail
