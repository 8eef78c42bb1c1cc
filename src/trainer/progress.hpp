// A worker's progress record in the arena (WorkerProgress) and the seqlock that
// lets the parent read it whole. Private to the trainer.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "hogwild/sanitizers.hpp"
#include "memory/single_writer.hpp"

namespace hogwild {

// Per-worker counters, each on its own cache lines (no false sharing between
// workers). Written by the worker with relaxed stores, read by the parent, and read
// back by a restarted worker (or a resumed run) to continue where this one stopped:
// `epoch`, `position` and `loss` are published together every 64 mini-batches (at
// each merge or flush instead when the worker trains a replica or hot coordinates,
// whose unmerged changes a crash loses) and at the end of the epoch's loop.
// `begun` and `samples` bracket every write to the shared weights (each mini-batch's
// step; a replica's merge, a hot window's flush): begun is raised before the writes,
// samples after (release), so a copy of the weights holds the updates of between
// sum(samples) read before it (acquire) and sum(begun) read after it (after an
// acquire fence): what an evaluation's metrics line says it scored (Run::capture).
struct alignas(128) WorkerProgress {
  std::atomic<std::uint64_t> samples{0};      // examples whose updates are in the weights
  std::atomic<std::uint64_t> begun{0};        // ... and those whose writes have begun
  std::atomic<std::uint32_t> epochs_done{0};  // release: epoch loss is published
  std::atomic<std::int32_t> pid{0};
  std::atomic<std::uint32_t> epoch{0};        // the epoch `position` refers to
  std::atomic<std::uint64_t> position{0};     // rows of that epoch's order done
  std::atomic<double> loss{0};                // summed loss of those rows
  std::atomic<std::int64_t> finish_ns{0};     // steady clock when the worker finished
  std::atomic<std::uint64_t> exit_memory{0};  // its share of anonymous pages at exit
  std::atomic<std::uint64_t> merges{0};       // its replica's merges, at exit
  std::atomic<std::uint64_t> merge_every{0};  // its replica's F at exit (--merge-every auto)
  std::atomic<std::uint64_t> flushes{0};      // its hot window's flushes, at exit
  std::atomic<std::uint64_t> flush_every{0};  // its hot window's interval at exit
  std::atomic<std::uint64_t> node_syncs{0};     // hogwild across nodes: worker 0's syncs,
  std::atomic<std::int64_t> node_sync_ns{0};    // and their time, at exit,
  std::atomic<std::uint64_t> node_sync_others{0};  // and the other leaders' examples they merged
  std::atomic<std::uint32_t> counted{0};      // epochs whose finish it added to the count
  // --layout auto (modes/hogwild/layout_probe.hpp): the probe's figures, published
  // (release on `probed`) once its windows are measured, and the layout it chose
  // (1 + WeightLayout; 0: none yet, or no probe). probe_hot_ns: 0 where hot
  // coordinates were not among its choices.
  std::atomic<double> probe_shared_ns{0}, probe_replica_ns{0}, probe_hot_ns{0};
  std::atomic<std::uint32_t> probe_windows{0};
  std::atomic<std::uint32_t> probed{0};
  std::atomic<std::uint32_t> layout{0};
  // Record 0's only: the run's decision, which every worker takes (the first to
  // decide claims it with a compare-and-swap, writes the figures it decided from,
  // then the layout), so that no two workers can decide apart.
  std::atomic<std::uint32_t> run_layout{0};
  std::atomic<std::uint32_t> run_windows{0};
  std::atomic<std::uint64_t> run_window_ns{0};  // the probe's windows' length
  std::atomic<double> run_shared_ns{0}, run_replica_ns{0}, run_hot_ns{0};
  // ... and the first window of the clock past the run's warm windows (the first
  // worker to begin probing sets it), before which every worker is on its replica.
  std::atomic<std::uint64_t> run_warm_end{0};
  // ... and the phases the probe still measures, from a window on (the first worker
  // to have measured one window of each posts them: (window << 3) | phase bits;
  // 0: every phase), so that every worker's windows follow one cycle.
  std::atomic<std::uint64_t> run_live{0};
  // --balance steal (trainer/work_share.hpp). As an owner: the state of its share
  // of the current epoch (ShareWord, compare-and-swap only), the loss of the rows
  // thieves took from it (written by the thief that holds the share's range), and
  // the rows of its earlier epochs that others trained, above the epochs counted
  // (rows << 16 | epochs; one store, so a respawn counts no epoch twice).
  std::atomic<std::uint64_t> share{0};
  std::atomic<double> stolen_loss{0};
  std::atomic<std::uint64_t> given{0};
  // As a thief, once it has finished every epoch: the steal it holds, written
  // before the compare-and-swap that takes it (the range's end in grains, its
  // `samples`, the owner's stolen_loss and its own `stole` then); `position` and
  // `loss` then count the stolen range's rows. stole: rows it trained from
  // others' shares, all steals done.
  std::atomic<std::uint64_t> steal_end{0}, steal_base{0}, stole_base{0}, stole{0};
  std::atomic<double> steal_loss_base{0};
  std::atomic<std::uint32_t> seq{0};          // seqlock over epoch, position, loss, epochs_done
};

namespace detail {
// std::atomic_thread_fence, but a compiler barrier under ThreadSanitizer: it does
// not model fences (GCC refuses them with -fsanitize=thread), and every access
// these fences order is atomic, so it has no race to report either way.
inline void fence(std::memory_order order) noexcept {
#if defined(HOGWILD_TSAN)
  std::atomic_signal_fence(order);
#else
  std::atomic_thread_fence(order);
#endif
}

// The writer's half of WorkerProgress's seqlock (its one writer is the worker):
// `seq` is odd while epoch, position, loss or epochs_done change, so a reader
// (the parent's checkpoint) takes them only from one publication.
inline void record_write_begin(WorkerProgress& p) noexcept {
  p.seq.store(p.seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  fence(std::memory_order_release);  // odd before the fields change
}
inline void record_write_end(WorkerProgress& p) noexcept {
  p.seq.store(p.seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}
// Before writes to the shared weights that bring them to `seen` examples (a
// batch's step, a replica's merge, a hot window's flush): the fence orders the
// store of begun before every later store (the writes).
inline void begin_writes(WorkerProgress& p, std::uint64_t seen) noexcept {
  p.begun.store(seen, std::memory_order_relaxed);
  fence(std::memory_order_release);
}
// The worker's place: `position` rows of its epoch done, their summed `loss`, and
// `seen` examples whose updates are in the shared weights.
inline void publish_record(WorkerProgress& p, std::uint64_t seen, std::size_t position,
                           double loss) noexcept {
  record_write_begin(p);
  p.loss.store(loss, std::memory_order_relaxed);
  p.position.store(position, std::memory_order_relaxed);
  record_write_end(p);
  p.samples.store(seen, std::memory_order_release);  // also stored every batch, outside
}
}  // namespace detail

}  // namespace hogwild
