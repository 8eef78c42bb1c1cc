// lock: one robust interprocess mutex held around each mini-batch's read, gradient
// and update ("locking updates"): the baseline that shows what Hogwild saves. The
// mutex is the mode's block of the arena; a worker that dies holding it leaves it
// to the next, which recovers it (counted in the summary's lock_recoveries).
#include <new>

#include "hogwild/model_base.hpp"
#include "memory/robust_mutex.hpp"
#include "modes/hogwild/writer_parts.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {

RobustMutex& lock_in(Arena& arena) {
  return *std::launder(reinterpret_cast<RobustMutex*>(arena.block("lock").data()));
}

// The lock around each step: taken before the step reads the weights, given back
// once it has written them.
class LockPart final : public EpochPart {
 public:
  explicit LockPart(RobustMutex& mutex) : mutex_(mutex) {}
  void enter_step(const Batch&) override { mutex_.lock(); }
  void leave_step() override { mutex_.unlock(); }

 private:
  RobustMutex& mutex_;
};

class Lock final : public ModeDef {
 public:
  std::string_view name() const override { return "lock"; }
  std::string_view summary() const override { return "one mutex around each mini-batch"; }
  std::uint8_t access() const override { return access_index<LockUpdate>(); }
  std::optional<DeviceAccess> device_access() const override { return DeviceAccess::lock; }
  void arena_blocks(const ModeArena&, std::vector<BlockSpec>& blocks) const override {
    blocks.push_back({"lock", sizeof(RobustMutex)});
  }
  void init_blocks(const ModeArena&, Arena& arena) const override {
    (new (arena.block("lock").data()) RobustMutex)->init();
  }
  // The lock, then hogwild's options: --hot-k (its flushes hold the lock too), and
  // across nodes the node sync.
  void make_parts(const ModeWorker& w, std::vector<std::unique_ptr<EpochPart>>& parts) const override {
    RobustMutex& mutex = lock_in(w.arena);
    parts.push_back(std::make_unique<LockPart>(mutex));
    add_writer_parts(w, *this, parts, &mutex);
  }
  void collect(Arena& arena, TrainResult& r) const override {
    r.lock_recoveries = lock_in(arena).recoveries();
  }
};
}  // namespace

const ModeDef& lock_mode() {
  static const Lock mode;
  return mode;
}

}  // namespace hogwild::detail
