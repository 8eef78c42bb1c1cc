// Memory spaces' host access, and copies of parameter sets: ParamSnapshot,
// copy_ranges, coalesce_ranges.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "hogwild/error.hpp"
#include "hogwild/param_snapshot.hpp"
#include "hogwild/update_policy.hpp"

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
};

// The shared arena: one relaxed load or store per float, as the steps' own
// accesses (THE INTENDED RACE, update_policy.hpp), so a copy taken while workers
// write is well-defined.
class SharedAccess final : public HostAccess {
 public:
  void read(float* dst, const float* src, std::size_t n) const override {
    for (std::size_t i = 0; i < n; ++i) dst[i] = detail::relaxed_load(src + i);
  }
  void write(float* dst, const float* src, std::size_t n) const override {
    for (std::size_t i = 0; i < n; ++i) detail::relaxed_store(dst + i, src[i]);
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
    const HostAccess& access = host_access(from[t].space);
    const float* src = from.data(t);
    float* dst = to.data(t);
    if (t >= ranges.size() || ranges[t].empty())
      access.read(dst, src, from.size(t));
    else
      for (const auto& [begin, end] : ranges[t]) access.read(dst + begin, src + begin, end - begin);
  }
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
