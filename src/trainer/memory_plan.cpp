#include "trainer/memory_plan.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <tuple>
#include <fmt/format.h>

#include "hogwild/checkpoint.hpp"
#include "hogwild/error.hpp"
#include "process.hpp"
#include "trainer/run.hpp"

namespace hogwild {

namespace {

std::string mib(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t{10} << 30))
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30));
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

std::string MemoryEstimate::describe(std::size_t shown) const {
  std::string s = mib(total) + " (";
  std::size_t n = 0;
  std::uint64_t rest = 0;
  for (const auto& p : parts) {
    if (p.possible) continue;
    if (n++ < shown)
      s += fmt::format("{}{} {}", n > 1 ? ", " : "", p.what, mib(p.bytes));
    else
      rest += p.bytes;
  }
  if (n > shown) s += fmt::format(", {} more {}", n - shown, mib(rest));
  s += ")";
  for (const auto& p : parts)
    if (p.possible) s += fmt::format("; {} more if {}", mib(p.bytes), p.what);
  return s;
}

}  // namespace hogwild

namespace hogwild::detail {

namespace {

// What a forked process adds of its own before it allocates anything: the pages of
// its stack and of the heap it writes (copied from its parent's on first write),
// measured on workers that hold nothing else (softmax on 40k features, 1 to 8
// workers: 0.2 MiB each).
constexpr std::uint64_t kProcessBytes = 512 << 10;
// A thread's address space: its stack (8 MiB) and the malloc arena glibc reserves
// for it (64 MiB), which RLIMIT_AS counts though it is mostly never touched.
constexpr std::uint64_t kThreadAddressSpace = 72 << 20;
// What a process maps beyond what it is known to allocate: heap growth, the small
// buffers of its libraries and of its mode (a parameter server's replica mapped 7.6
// MiB more than its weights and pushes).
constexpr std::uint64_t kSlackAddressSpace = 16 << 20;
// The checkpoint writer's buffer beside its chunk (src/checkpoint.cpp).
constexpr std::uint64_t kCheckpointBuffer = 1 << 20;

std::uint64_t floats_bytes(std::uint64_t floats) { return floats * sizeof(float); }

}  // namespace

MemoryPlan plan_memory(const Run& run, std::uint64_t arena, std::uint64_t window,
                       std::uint64_t other_rows) {
  const TrainConfig& cfg = run.cfg;
  const ModeDef& mode = run.mode;
  const bool stateful = has_state(cfg.optimizer);
  std::uint64_t padded = 0, plain = 0, largest = 0;
  for (const auto& s : run.specs) {
    padded += (s.size + 15) / 16 * 16;
    plain += s.size;
    largest = std::max<std::uint64_t>(largest, s.size);
  }
  const unsigned workers = mode.parallel() ? run.workers : 0;  // serial: the parent trains
  const std::uint64_t share = run.train.rows() / std::max(1u, run.workers);
  // A worker's steps read the weights while others write them: those of a mode
  // compiled with the racing access policies (hogwild's, atomic's, striped's; not
  // the lock's one writer, nor captured gradients), without a replica.
  const bool live = mode.parallel() && cfg.merge_every == 0 &&
                    (mode.access() == access_index<HogwildUpdate>() ||
                     mode.access() == access_index<AtomicUpdate>());

  MemoryPlan plan;
  MemoryEstimate& e = plan.estimate;
  auto add = [&](std::string what, std::uint64_t bytes, bool held = false, bool possible = false) {
    if (bytes) e.parts.push_back({std::move(what), bytes, held, possible});
  };
  // Shared, once: the arena and the rows.
  std::string arena_what = "parameter arena (weights";
  if (stateful) arena_what += ", optimiser state";
  if (mode.parallel() && run.test)
    arena_what += fmt::format(", {} evaluation snapshots", run.slot_count);
  if (!cfg.shm_dir.empty()) arena_what += ", in " + cfg.shm_dir;
  arena_what += ")";
  add(arena_what, arena);
  const std::uint64_t rows = run.train.bytes() + other_rows;
  add("training rows", rows, true);
  if (run.test) add("test rows", run.test->bytes(), true);
  const std::uint64_t rows_all = rows + (run.test ? run.test->bytes() : 0);
  const bool served = cfg.worker_start == WorkerStart::fork_server && mode.parallel();
  if (served) add("the fork server's copies of the rows", rows_all);
  // A hot window's copy of the rows' indices, made after this plan: the parent's,
  // which forked workers share, and a served worker's own (it makes its Run).
  if (!run.hot.empty())
    add(served ? "the hot window's renumbered indices (the parent's and each worker's)"
               : "the hot window's renumbered indices",
        run.train.nnz() * sizeof(std::uint32_t) * (served ? 1 + workers : 1));
  // The parent: its heap as it is (the targets, the labels, what loading left), and
  // what it adds: the evaluations' copy, the result's, the checkpoint's chunk.
  add("the parent's heap now", anon_bytes(), true);
  // The evaluations' copy of the live weights: made for every timed evaluation
  // (--eval-every); otherwise an epoch's evaluation reads its snapshot, and only a
  // fallback copies them (an epoch whose snapshot was not taken, a restarted worker).
  const std::uint64_t eval_copy = mode.parallel() && run.test ? floats_bytes(padded) : 0;
  const bool eval_copy_possible = cfg.eval_every <= 0;
  const std::uint64_t result_copy =
      cfg.result_parameters ? floats_bytes(plain) * (stateful ? 2 : 1) : 0;
  const std::uint64_t checkpoint =
      cfg.checkpoint.empty()
          ? 0
          : floats_bytes(std::min<std::uint64_t>(largest, kCheckpointChunkFloats)) + kCheckpointBuffer;
  std::vector<MemoryPart> parent_adds{
      {eval_copy_possible ? "an evaluation copies the live weights (a restarted worker, an epoch "
                            "whose snapshot was not taken)"
                          : "the evaluations' copy of the weights",
       eval_copy, false, eval_copy_possible},
      {"the result's copy of the weights", result_copy},
      {"the checkpoint writer's buffer", checkpoint}};
  // Each worker's own: its rows' order, its steps' buffers, and what its mode keeps.
  const std::uint64_t order = share * sizeof(std::uint32_t);
  const Model::StepMemory steps = run.model.step_memory(cfg.batch, live);
  const std::uint64_t step = steps.resident;
  std::uint64_t mode_own = 0;
  std::string mode_what;
  const ModeDef::Keeps keeps = mode.worker_keeps({cfg, run.specs, run.workers});
  if (cfg.merge_every && mode.replicas()) {
    mode_own = 2 * floats_bytes(padded), mode_what = "replica and its base";
  } else if (keeps.bytes) {
    mode_own = keeps.bytes, mode_what = keeps.what;
  } else if (window) {
    mode_own = window, mode_what = "hot window";
  }
  const std::uint64_t worker_own = kProcessBytes + order + step + mode_own;
  std::string own_what = "its process " + mib(kProcessBytes);
  for (const auto& [bytes, what] : {std::pair{order, "rows' order"}, std::pair{step, "batch buffers"},
                                    std::pair{mode_own, mode_what.c_str()}})
    if (bytes >= (64 << 10)) own_what += fmt::format(", {} {}", what, mib(bytes));
  if (workers)
    add(workers == 1 ? "1 worker's own (" + own_what + ")"
                     : fmt::format("{} workers' own (each: {})", workers, own_what),
        workers * worker_own);
  if (!mode.parallel()) {
    std::uint64_t own = order + run.model.step_memory(cfg.batch, false).resident;
    if (mode.threaded())  // dp: a model, its buffers and a gradient for every thread
      own += cfg.workers *
             (run.model.step_memory(cfg.batch / std::max(1u, cfg.workers), false).resident +
              floats_bytes(padded));
    parent_adds.push_back({"the training step's order and buffers", own});
  }
  for (const auto& p : parent_adds) add(p.what, p.bytes, false, p.possible);
  add(fmt::format("{} parameter server(s)", run.servers), run.servers * kProcessBytes);
  if (ForkServer::get()) add("the fork server", kProcessBytes);
  std::stable_sort(e.parts.begin(), e.parts.end(),
                   [](const MemoryPart& a, const MemoryPart& b) { return a.bytes > b.bytes; });
  for (const auto& p : e.parts) {
    e.worst += p.bytes;
    if (!p.possible) e.total += p.bytes;
    if (p.held) e.held += p.bytes;
  }
  plan.to_allocate = e.worst - e.held - (cfg.shm_dir.empty() ? 0 : arena);

  // Address spaces: what each process maps now (the rows, the program, its threads'
  // reservations) and what it will map.
  const std::uint64_t now = address_space_bytes();
  plan.parent_space = {{"mapped now", now}, {arena_what, arena}, {"heap growth", kSlackAddressSpace}};
  for (const auto& p : parent_adds) plan.parent_space.push_back(p);
  // What a library maps while a step or an evaluation runs (the parent trains in
  // serial mode, and evaluates with the model's products).
  const Model::StepMemory parent_steps = run.model.step_memory(cfg.batch, false);
  if (!mode.parallel() || run.test)
    plan.parent_space.push_back({"its products' transient mappings",
                                 parent_steps.mapped - std::min(parent_steps.mapped, parent_steps.resident)});
  // Threads it starts: dp's, or serial's display ticker.
  const unsigned threads = mode.threaded() ? cfg.workers : mode.parallel() ? 0 : 1;
  plan.parent_space.push_back({fmt::format("{} thread(s)' stack and malloc arena", threads),
                               threads * kThreadAddressSpace});
  if (mode.parallel()) {
    std::uint64_t from = now;  // a forked worker starts as a copy of the parent
    std::string from_what = "the parent's mappings now";
    if (const ForkServer* server = ForkServer::get(); served && server) {
      from = address_space_bytes(server->pid()) + rows_all;
      from_what = "the fork server's mappings and the rows";
    }
    plan.worker_space = {{from_what, from},
                         {arena_what, arena},
                         {"its own: " + own_what, worker_own},
                         {"heap growth", kSlackAddressSpace}};
    if (window) plan.worker_space.push_back({"its hot window", window});
    plan.worker_space.push_back({"its products' transient mappings",
                                 steps.mapped - std::min(steps.mapped, steps.resident)});
  }
  auto sum = [](const std::vector<MemoryPart>& v) {
    std::uint64_t n = 0;
    for (const auto& p : v) n += p.bytes;
    return n;
  };
  e.parent_address_space = sum(plan.parent_space);
  e.worker_address_space = sum(plan.worker_space);
  return plan;
}

void check_memory(const MemoryPlan& plan) {
  const MemoryEstimate& e = plan.estimate;
  const std::uint64_t avail = mem_available_bytes();
  if (avail != 0 && plan.to_allocate > avail)
    throw ResourceError(fmt::format(
        "the run needs {} of memory more than it holds now, but only {} is available (its peak: "
        "{}); use a smaller model (fewer features or classes), fewer workers, or a machine with "
        "more memory", mib(plan.to_allocate), mib(avail), e.describe()));
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return;
  const std::uint64_t limit = as.rlim_cur;
  for (const auto& [who, bytes, parts] :
       {std::tuple{"the parent", e.parent_address_space, &plan.parent_space},
        std::tuple{"each worker", e.worker_address_space, &plan.worker_space}}) {
    if (bytes <= limit) continue;
    std::string list;
    for (const auto& p : *parts)
      if (p.bytes) list += fmt::format("{}{} {}", list.empty() ? "" : ", ", p.what, mib(p.bytes));
    throw ResourceError(fmt::format(
        "{} would map {} ({}), over the address-space limit (ulimit -v) of {}, which limits each "
        "process; the whole run needs {}; raise the limit or use a smaller model",
        who, mib(bytes), list, mib(limit), e.describe()));
  }
}

}  // namespace hogwild::detail
