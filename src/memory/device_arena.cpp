#include "memory/device_arena.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <set>

#include "hogwild/error.hpp"

namespace hogwild::detail {

namespace {

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// memfd + mmap: an allocation shared by file descriptor and reference-counted
// across the descriptor and every mapping, as VMM memory is.
class StandInMapping final : public DeviceMapping {
 public:
  StandInMapping(int fd, std::size_t bytes) : fd_(fd), size_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      close(fd_);
      throw ResourceError(fmt::format("mapping {} bytes of stand-in device memory: {}", bytes,
                                      std::strerror(e)));
    }
    base_ = static_cast<std::byte*>(p);
  }
  ~StandInMapping() override {
    munmap(base_, size_);
    close(fd_);
  }
  std::byte* base() const noexcept override { return base_; }
  std::size_t size() const noexcept override { return size_; }
  DeviceHandle handle() const override { return {fd_, {}}; }

 private:
  int fd_;
  std::byte* base_ = nullptr;
  std::size_t size_;
};

class StandInMemory final : public DeviceMemory {
 public:
  std::string_view name() const noexcept override { return "host stand-in"; }
  std::size_t granularity() const override {
    return static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  }
  bool shares_fd() const noexcept override { return true; }
  std::unique_ptr<DeviceMapping> allocate(std::size_t bytes) override {
    const int fd = memfd_create("hogwild-device-standin", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int e = errno;
      if (fd >= 0) close(fd);
      throw ResourceError(fmt::format("allocating {} bytes of stand-in device memory: {}", bytes,
                                      std::strerror(e)));
    }
    return std::make_unique<StandInMapping>(fd, bytes);
  }
  std::unique_ptr<DeviceMapping> import(const DeviceHandle& h, std::size_t bytes) override {
    struct stat st{};
    if (h.fd < 0 || fstat(h.fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < bytes)
      throw Error(fmt::format("descriptor {} holds no stand-in device allocation of {} bytes",
                              h.fd, bytes));
    const int fd = dup(h.fd);
    if (fd < 0) throw ResourceError(fmt::format("dup: {}", std::strerror(errno)));
    return std::make_unique<StandInMapping>(fd, bytes);
  }
};

}  // namespace

std::unique_ptr<DeviceMemory> host_standin_memory() { return std::make_unique<StandInMemory>(); }

DeviceArenaTable DeviceArenaTable::lay_out(const std::vector<BlockSpec>& blocks,
                                           std::size_t granularity) {
  if (blocks.size() > Arena::kMaxBlocks)
    throw ConfigError(fmt::format("a device arena holds at most {} blocks, not {}",
                                  Arena::kMaxBlocks, blocks.size()));
  DeviceArenaTable t;
  t.magic = kMagic;
  std::set<std::string_view> names;
  std::uint64_t at = 0;
  for (const auto& b : blocks) {
    if (b.name.empty() || b.name.size() >= sizeof(Entry::name))
      throw ConfigError(fmt::format("device arena block name '{}' must have 1 to {} characters",
                                    b.name, sizeof(Entry::name) - 1));
    if (!names.insert(b.name).second)
      throw ConfigError(fmt::format("device arena block '{}' is named twice", b.name));
    Entry& e = t.entries[t.count++];
    std::memcpy(e.name, b.name.data(), b.name.size());
    e.offset = at;
    e.bytes = b.bytes;
    at = round_up(at + b.bytes, kAlignment);
  }
  t.size = round_up(std::max<std::uint64_t>(at, 1), granularity);
  return t;
}

void DeviceArenaTable::check() const {
  if (magic != kMagic || count > Arena::kMaxBlocks)
    throw Error("the device arena's table is not one this version wrote");
  for (std::uint32_t i = 0; i < count; ++i)
    if (entries[i].offset + entries[i].bytes > size)
      throw Error(fmt::format("device arena block '{}' ends past the arena ({} > {} bytes)",
                              entries[i].name, entries[i].offset + entries[i].bytes, size));
}

const DeviceArenaTable::Entry& DeviceArenaTable::find(std::string_view name) const {
  for (std::uint32_t i = 0; i < count; ++i)
    if (name == entries[i].name) return entries[i];
  throw Error(fmt::format("the device arena has no block '{}'", name));
}

DeviceArena DeviceArena::create(std::shared_ptr<DeviceMemory> memory,
                                const std::vector<BlockSpec>& blocks) {
  DeviceArena a;
  a.table_ = DeviceArenaTable::lay_out(blocks, memory->granularity());
  a.mapping_ = memory->allocate(a.table_.size);
  a.table_.legacy = a.mapping_->handle().legacy;
  a.memory_ = std::move(memory);
  return a;
}

DeviceArena DeviceArena::attach(std::shared_ptr<DeviceMemory> memory,
                                const DeviceArenaTable& table, int fd) {
  table.check();
  DeviceArena a;
  a.table_ = table;
  a.mapping_ = memory->import(DeviceHandle{fd, table.legacy}, table.size);
  a.memory_ = std::move(memory);
  return a;
}

std::byte* DeviceArena::block(std::string_view name) const {
  return mapping_->base() + table_.find(name).offset;
}

}  // namespace hogwild::detail
