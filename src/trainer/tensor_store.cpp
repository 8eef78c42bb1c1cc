#include "trainer/tensor_store.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "hogwild/error.hpp"
#include "hogwild/rng.hpp"
#include "memory/device_arena.hpp"

namespace hogwild::detail {

namespace {

// The CPU's store: a block per tensor (and per state tensor) in the shared arena.
class SharedArenaStore final : public TensorStore {
 public:
  MemorySpace space() const override { return MemorySpace::host_shared; }
  std::vector<BlockSpec> arena_blocks(const std::vector<TensorSpec>& specs, bool state,
                                      std::size_t tail_bytes) const override {
    std::vector<BlockSpec> blocks;
    for (const auto& s : specs) {
      blocks.push_back({param_block(s.name),
                        s.size * sizeof(float) + (&s == &specs[0] ? tail_bytes : 0)});
      if (state) blocks.push_back({state_block(s.name), s.size * sizeof(float)});
    }
    return blocks;
  }
  ParamSet open(const Arena& arena, const std::vector<TensorSpec>& specs, bool state, bool,
                int) override {
    std::vector<ParamSet::Tensor> t;
    for (const auto& s : specs)  // the CPU's steps, replicas and servers read floats
      if (s.dtype != Dtype::f32)
        throw ConfigError(fmt::format("tensor \"{}\" is {}: the CPU trains fp32 tensors (--factors "
                                      "fp16 needs --device cuda)", s.name, to_string(s.dtype)));
    for (const auto& s : specs) {  // blocks start zeroed, as AdaGrad's accumulators must
      ParamSet::Tensor x{s.name, arena.array<float>(param_block(s.name)).data(), s.size,
                         state ? arena.array<float>(state_block(s.name)).data() : nullptr};
      x.space = MemorySpace::host_shared;
      t.push_back(std::move(x));
    }
    return ParamSet(std::move(t));
  }
};

// The device's store: the tensors, their state and a lock word in one device
// arena, whose table is the host arena's "device:table" block.
class DeviceArenaStore final : public TensorStore {
 public:
  DeviceArenaStore(std::function<std::shared_ptr<DeviceMemory>()> memory, const Dataset* rows,
                   const float* targets)
      : memory_(std::move(memory)), data_(rows), targets_(targets) {}
  MemorySpace space() const override { return MemorySpace::device; }
  std::vector<BlockSpec> arena_blocks(const std::vector<TensorSpec>&, bool, std::size_t) const override {
    return {{kTable, sizeof(DeviceArenaTable)}};
  }
  ParamSet open(const Arena& arena, const std::vector<TensorSpec>& specs, bool state, bool attach,
                int fd) override {
    auto& table = arena.object<DeviceArenaTable>(kTable);
    if (attach) {
      device_ = DeviceArena::attach(memory_(), table, fd);
    } else {
      std::vector<BlockSpec> blocks{{kLock, sizeof(int)}};
      for (const auto& s : specs) {
        blocks.push_back({param_block(s.name), s.size * element_bytes(s.dtype)});
        if (state) blocks.push_back({state_block(s.name), s.size * sizeof(float)});
      }
      if (data_) add_row_blocks(blocks);
      device_ = DeviceArena::create(memory_(), blocks);
      table = device_.table();
      if (data_) upload_rows();
    }
    if (data_) {
      const auto at = [&](const char* name) -> const void* {
        return device_.table().find(name).bytes ? device_.block(name) : nullptr;
      };
      rows_.offsets = static_cast<const std::uint64_t*>(at(kOffsets));
      rows_.index = static_cast<const std::uint32_t*>(at(kIndex));
      rows_.value = static_cast<const float*>(at(kValue));
      rows_.pixels = static_cast<const std::uint8_t*>(at(kPixels));
      rows_.target = static_cast<const float*>(at(kTarget));
    }
    std::vector<ParamSet::Tensor> t;
    for (const auto& s : specs) {  // zero-filled at creation, as AdaGrad's accumulators must be
      ParamSet::Tensor x{s.name, device_.array<float>(param_block(s.name)), s.size,
                         state ? device_.array<float>(state_block(s.name)) : nullptr};
      x.space = MemorySpace::device;
      x.dtype = s.dtype;
      t.push_back(std::move(x));
    }
    return ParamSet(std::move(t));
  }
  int handle() const override { return device_.handle(); }
  int* device_lock() const override { return device_.array<int>(kLock); }
  const StoredRows* rows() const override { return data_ ? &rows_ : nullptr; }

 private:
  static constexpr const char* kTable = "device:table";
  static constexpr const char* kLock = "device:lock";
  static constexpr const char* kOffsets = "rows:offsets";
  static constexpr const char* kIndex = "rows:index";
  static constexpr const char* kValue = "rows:value";
  static constexpr const char* kPixels = "rows:pixels";
  static constexpr const char* kTarget = "rows:target";

  // Every array of the layout (empty ones too, so that every process finds them).
  struct RowArray {
    const char* block;
    const void* host;
    std::size_t bytes;
  };
  std::array<RowArray, 5> row_arrays() const {
    return {{{kOffsets, data_->offsets().data(), data_->offsets().size_bytes()},
             {kIndex, data_->indices().data(), data_->indices().size_bytes()},
             {kValue, data_->values().data(), data_->values().size_bytes()},
             {kPixels, data_->pixels().data(), data_->pixels().size_bytes()},
             {kTarget, targets_, data_->rows() * sizeof(float)}}};
  }
  void add_row_blocks(std::vector<BlockSpec>& blocks) const {
    for (const RowArray& a : row_arrays()) blocks.push_back({a.block, a.bytes});
  }
  // Byte arrays through the space's float access: a block's bytes as floats, the
  // tail of one whose size is no multiple of 4 through a padded copy.
  void upload(const char* name, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    const HostAccess& access = host_access(MemorySpace::device);
    auto* dst = device_.array<float>(name);
    const std::size_t whole = bytes / sizeof(float);
    if (whole) access.write(dst, static_cast<const float*>(src), whole);
    if (bytes % sizeof(float)) {
      float tail = 0;
      std::memcpy(&tail, static_cast<const std::byte*>(src) + whole * sizeof(float),
                  bytes % sizeof(float));
      access.write(dst + whole, &tail, 1);
    }
  }
  void upload_rows() {
    for (const RowArray& a : row_arrays()) upload(a.block, a.host, a.bytes);
  }

  std::function<std::shared_ptr<DeviceMemory>()> memory_;
  const Dataset* data_;
  const float* targets_;
  DeviceArena device_;
  StoredRows rows_;
};

}  // namespace

std::unique_ptr<TensorStore> make_tensor_store(
    MemorySpace space, std::function<std::shared_ptr<DeviceMemory>()> device_memory,
    const Dataset* rows, const float* targets) {
  if (space == MemorySpace::device) {
    if (!device_memory) throw ConfigError("device tensors need a device memory (--device cuda)");
    return std::make_unique<DeviceArenaStore>(std::move(device_memory), rows, targets);
  }
  return std::make_unique<SharedArenaStore>();
}

std::string param_block(const std::string& tensor) { return "param:" + tensor; }
std::string state_block(const std::string& tensor) { return "state:" + tensor; }

void initialise(const ParamSet& p, const std::vector<TensorSpec>& specs, std::uint64_t seed) {
  Rng rng(seed ^ 0x5eedf00dULL);
  std::vector<float> chunk;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const Init init = specs[i].init;
    // A fresh host arena reads as zeros already (new shared-memory pages): writing
    // them again cost a 4 MB model 1 ms and faulted in pages a sparse model may never
    // touch. Device memory starts undefined and is written.
    if (init.kind == Init::zeros && p[i].space != MemorySpace::device) continue;
    for (std::size_t begin = 0; begin < specs[i].size; begin += 1 << 16) {
      chunk.resize(std::min<std::size_t>(specs[i].size - begin, 1 << 16));
      for (float& x : chunk) {
        switch (init.kind) {
          case Init::zeros: x = 0; break;
          case Init::normal: x = static_cast<float>(rng.normal() * init.scale); break;
          case Init::uniform: x = static_cast<float>((2 * rng.uniform() - 1) * init.scale); break;
        }
      }
      write_values(p[i].space, p[i].dtype, p.data(i), begin, chunk.data(), chunk.size());
    }
  }
}

}  // namespace hogwild::detail
