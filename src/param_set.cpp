// Memory spaces' host access, and copies of parameter sets: ParamSnapshot,
// copy_ranges, coalesce_ranges.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "hogwild/error.hpp"
#include "memory/param_snapshot.hpp"
#include "hogwild/update_policy.hpp"
#include "kernels/gemm.hpp"
#include "memory/half.hpp"

namespace hogwild {

namespace {

// A process's own memory: memcpy.
class PrivateAccess final : public HostAccess {
 public:
  void read(float* dst, const float* src, std::size_t n) const override {
    if (n) std::memcpy(dst, src, n * sizeof(float));
  }
  void write(float* dst, const float* src, std::size_t n) const override {
    if (n) std::memcpy(dst, src, n * sizeof(float));
  }
  void read_bytes(void* dst, const void* src, std::size_t bytes) const override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void write_bytes(void* dst, const void* src, std::size_t bytes) const override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
};

// The shared arena: every float read or written whole, as the steps' own accesses
// (THE INTENDED RACE, update_policy.hpp), so a copy taken while workers write is
// well-defined. Reads go in whole 16-byte lanes (kernels::copy_from_shared): an
// epoch's evaluation snapshot of SpamAssassin's 2^20-float model took a millisecond
// one relaxed load at a time, a third of a 3 ms epoch. Writes (a resume, an initial
// model) stay one relaxed store at a time.
class SharedAccess final : public HostAccess {
 public:
  void read(float* dst, const float* src, std::size_t n) const override {
    kernels::copy_from_shared(dst, src, n);
  }
  void write(float* dst, const float* src, std::size_t n) const override {
    for (std::size_t i = 0; i < n; ++i) detail::relaxed_store(dst + i, src[i]);
  }
  // Bytes one relaxed load or store at a time (the arena's tensors are floats: this
  // serves blocks of other types, never a step's hot path).
  void read_bytes(void* dst, const void* src, std::size_t bytes) const override {
    auto* d = static_cast<unsigned char*>(dst);
    auto* s = static_cast<unsigned char*>(const_cast<void*>(src));
    for (std::size_t i = 0; i < bytes; ++i)
      d[i] = std::atomic_ref<unsigned char>(s[i]).load(std::memory_order_relaxed);
  }
  void write_bytes(void* dst, const void* src, std::size_t bytes) const override {
    auto* d = static_cast<unsigned char*>(dst);
    auto* s = static_cast<const unsigned char*>(src);
    for (std::size_t i = 0; i < bytes; ++i)
      std::atomic_ref<unsigned char>(d[i]).store(s[i], std::memory_order_relaxed);
  }
};

std::atomic<const HostAccess*> g_device{nullptr};

}  // namespace

const char* to_string(MemorySpace s) noexcept {
  switch (s) {
    case MemorySpace::host_shared: return "host shared";
    case MemorySpace::host_private: return "host private";
    case MemorySpace::device: return "device";
  }
  return "?";
}

const char* to_string(Dtype t) noexcept { return t == Dtype::f16 ? "fp16" : "fp32"; }

Dtype parse_dtype(const char* option, const std::string& name) {
  if (name == "fp32") return Dtype::f32;
  if (name == "fp16") return Dtype::f16;
  throw ConfigError(std::string("unknown ") + option + " \"" + name + "\"; expected fp32 or fp16");
}

const HostAccess& host_access(MemorySpace space) {
  static const PrivateAccess private_access;
  static const SharedAccess shared_access;
  switch (space) {
    case MemorySpace::host_private: return private_access;
    case MemorySpace::host_shared: return shared_access;
    case MemorySpace::device: break;
  }
  if (const HostAccess* d = g_device.load(std::memory_order_acquire)) return *d;
  throw ConfigError("parameters in device memory, and this build has no device support "
                    "(configure with -Dcuda=enabled)");
}

void register_device_access(const HostAccess& access) noexcept {
  g_device.store(&access, std::memory_order_release);
}

void read_values(MemorySpace space, Dtype type, const void* base, std::size_t begin,
                 std::size_t n, float* dst) {
  const HostAccess& access = host_access(space);
  if (type == Dtype::f32) return access.read(dst, static_cast<const float*>(base) + begin, n);
  const auto* src = static_cast<const std::uint16_t*>(base) + begin;
  std::uint16_t halves[4096];
  for (std::size_t done = 0; done < n; done += std::size(halves)) {
    const std::size_t m = std::min(n - done, std::size(halves));
    access.read_bytes(halves, src + done, m * sizeof(std::uint16_t));
    detail::halves_to_floats(halves, m, dst + done);
  }
}

void write_values(MemorySpace space, Dtype type, void* base, std::size_t begin, const float* src,
                  std::size_t n) {
  const HostAccess& access = host_access(space);
  if (type == Dtype::f32) return access.write(static_cast<float*>(base) + begin, src, n);
  auto* dst = static_cast<std::uint16_t*>(base) + begin;
  std::uint16_t halves[4096];
  for (std::size_t done = 0; done < n; done += std::size(halves)) {
    const std::size_t m = std::min(n - done, std::size(halves));
    detail::floats_to_halves(src + done, m, halves);
    access.write_bytes(dst + done, halves, m * sizeof(std::uint16_t));
  }
}

ParamSnapshot::ParamSnapshot(const ParamSet& live) {
  std::vector<ParamSet::Tensor> t;
  storage_.reserve(live.count());
  for (const auto& src : live.tensors()) {
    auto& dst = storage_.emplace_back(src.size);
    t.push_back({src.name, dst.data(), src.size});
  }
  view_ = ParamSet(std::move(t));
  copy_ranges(live, view_, {});
}

void ParamSnapshot::refresh(const ParamSet& live, const std::vector<Ranges>& ranges) {
  copy_ranges(live, view_, ranges);
}

void copy_ranges(const ParamSet& from, const ParamSet& to, const std::vector<Ranges>& ranges) {
  for (std::size_t t = 0; t < from.count(); ++t) {
    const ParamSet::Tensor& src = from[t];
    float* dst = to.data(t);
    if (t >= ranges.size() || ranges[t].empty()) {
      read_values(src.space, src.dtype, src.data, 0, src.size, dst);
    } else if (src.space != MemorySpace::device && src.dtype == Dtype::f32) {
      // Host floats: a short run (a hashed model's scattered features: tens of
      // thousands a snapshot) read in place, one relaxed load a float, rather than
      // through a call or two a run; a long one in whole lanes.
      const auto* from_floats = static_cast<const float*>(src.data);
      const HostAccess& access = host_access(src.space);
      for (const auto& [begin, end] : ranges[t]) {
        if (end - begin >= 16)
          access.read(dst + begin, from_floats + begin, end - begin);
        else
          for (std::size_t i = begin; i < end; ++i) dst[i] = detail::relaxed_load(from_floats + i);
      }
    } else {
      for (const auto& [begin, end] : ranges[t])
        read_values(src.space, src.dtype, src.data, begin, end - begin, dst + begin);
    }
  }
}

Ranges intersect_ranges(const Ranges& a, const Ranges& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  Ranges out;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const std::size_t begin = std::max(a[i].first, b[j].first);
    const std::size_t end = std::min(a[i].second, b[j].second);
    if (begin < end) out.emplace_back(begin, end);
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  if (out.empty()) out.emplace_back(0, 0);
  return out;
}

Ranges coalesce_ranges(const Ranges& ranges, std::size_t gap) {
  Ranges out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first - out.back().second < gap)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace hogwild
