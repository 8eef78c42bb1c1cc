// TrainConfig::validate: each option's own range, as declared (train_options()),
// whoever set the field; an option of one mode given to another; then what the
// options ask of each other.
#include <fmt/format.h>

#include "comm/gloo.hpp"
#include "hogwild/error.hpp"
#include "hogwild/options.hpp"
#include "hogwild/trainer.hpp"
#include "modes/mode_def.hpp"

namespace hogwild {

void TrainConfig::validate() const {
  // Each option's own range (hogwild/options.hpp), whoever set the field; and an
  // option of one mode given to another.
  // (Each set writes back the value read from this config: one scratch copy serves all.)
  static const TrainConfig defaults;
  TrainConfig scratch = *this;
  for (const auto& o : train_options()) {
    const std::string value = o.get(*this);
    o.set(scratch, value);
    if (!o.mode.empty() && value != o.get(defaults) && !detail::mode_takes(o.mode, mode))
      throw ConfigError(fmt::format("--{} applies to --mode {}, not {}", o.name, o.mode,
                                    to_string(mode)));
  }
  detail::check_mode_options(*this);
  detail::mode_def(mode).check(*this);
  if (device_streams != 1 && device != Device::cuda)
    throw ConfigError("--device-streams applies to --device cuda only");
  if (cuda_ipc != CudaIpc::vmm && device != Device::cuda)
    throw ConfigError("--cuda-ipc applies to --device cuda only");
  if (device_warps != 0 && device != Device::cuda)
    throw ConfigError("--device-warps applies to --device cuda only");
  if (model_options.factors != Dtype::f32 && device != Device::cuda)
    throw ConfigError(fmt::format("--factors {} stores the factors on the GPU: add --device cuda "
                                  "(the CPU trains fp32 factors)",
                                  to_string(model_options.factors)));
  // --layout names what --merge-every and --hot-k set; given with either, they agree.
  if (layout != WeightLayout::automatic) {
    const char* other = merge_every ? "--merge-every" : hot_k ? "--hot-k" : nullptr;
    const WeightLayout implied = merge_every ? WeightLayout::replicas : WeightLayout::hot;
    if (other && layout != implied)
      throw ConfigError(fmt::format("--layout {} and {} exclude each other ({} is --layout {})",
                                    to_string(layout), other, other, to_string(implied)));
    if (layout != WeightLayout::plain && optimizer != Optimizer::sgd)
      throw ConfigError(fmt::format("--layout {} works with --optimizer sgd only (a worker's "
                                    "private copy carries no optimiser state)",
                                    to_string(layout)));
  }
  if (hot_k > 0 && optimizer != Optimizer::sgd)
    throw ConfigError("--hot-k works with --optimizer sgd only");
  // --hot-flush paces a hot window's flushes: given where no window can be, it did
  // nothing (as --merge-every under --layout plain is refused).
  const bool window_possible =
      hot_k > 0 || (mode == Mode::hogwild && merge_every == 0 &&
                    (layout == WeightLayout::hot || layout == WeightLayout::automatic));
  if (hot_flush != kFlushAuto && !window_possible)
    throw ConfigError(fmt::format(
        "--hot-flush paces hot coordinates' flushes (--layout hot, --hot-k, or --layout auto's "
        "choice under --mode hogwild); this run has none ({})",
        merge_every ? std::string("--merge-every")
        : mode != Mode::hogwild ? fmt::format("--mode {}", to_string(mode))
                                : fmt::format("--layout {}", to_string(layout))));
  if (merge_every > 0) {
    if (!detail::mode_def(mode).replicas()) {
      throw ConfigError(fmt::format("--merge-every works with --mode {}, not {}",
                                    detail::mode_names_where(&detail::ModeDef::replicas),
                                    to_string(mode)));
    }
    if (optimizer != Optimizer::sgd)
      throw ConfigError("--merge-every works with --optimizer sgd only (a replica carries no "
                        "optimiser state)");
    if (hot_k > 0)
      throw ConfigError("--merge-every and --hot-k exclude each other: a replica already keeps "
                        "every coordinate private between merges");
  }
  const auto& def = detail::mode_def(mode);
  if (node_rank >= nodes)
    throw ConfigError(fmt::format("--node-rank {} is out of range for --nodes {} (0 to {})",
                                  node_rank, nodes, nodes - 1));
  if (straggler_worker >= 0) {
    const unsigned n = is_parallel(mode) ? workers : 1;
    if (static_cast<unsigned>(straggler_worker) >= n)
      throw ConfigError(fmt::format("--straggler {}:{}: there is no worker {} (workers 0 to {})",
                                    straggler_worker, straggler_factor, straggler_worker, n - 1));
    if (!(straggler_factor >= 1) || !(straggler_factor <= 1000))
      throw ConfigError(fmt::format("--straggler {}:{}: the factor must be from 1 to 1000",
                                    straggler_worker, straggler_factor));
    if (!def.parallel() && workers_used(mode, workers) > 1)
      throw ConfigError(fmt::format("--straggler does not apply to --mode {}: its threads share "
                                    "each step", to_string(mode)));
  }
  // --telemetry times the updates to the shared weights: a worker's private copy
  // (a replica, a hot window) has none to time, and the run would report nothing.
  if (telemetry && (merge_every != 0 || hot_k != 0 || layout == WeightLayout::hot ||
                    layout == WeightLayout::replicas))
    throw ConfigError(fmt::format(
        "--telemetry measures updates made to the shared weights, and {} trains a private copy",
        merge_every ? "--merge-every" : hot_k ? "--hot-k"
                                              : fmt::format("--layout {}", to_string(layout))));
  if (conflicts) {
    const bool copies = layout == WeightLayout::hot || layout == WeightLayout::replicas;
    if (!def.steps_write_weights() || merge_every != 0 || hot_k != 0 || copies)
      throw ConfigError(fmt::format(
          "--conflicts watches the writes of --mode {} to the shared weights, not --mode {}{}",
          detail::mode_names_where(&detail::ModeDef::steps_write_weights), to_string(mode),
          merge_every ? " with --merge-every" : hot_k ? " with --hot-k"
          : copies    ? fmt::format(" with --layout {}", to_string(layout))
                      : std::string()));
  }
  // Across nodes a mode meets the other nodes in its own collectives, or its workers
  // write the weights as they go and hogwild's node sync averages the nodes' weights.
  const auto syncable = [](const detail::ModeDef& m) { return m.parallel() && !m.joins_nodes(); };
  const bool syncs = sync_every > 0 || sync_seconds > 0;
  if (syncs && (nodes < 2 || !syncable(def)))
    throw ConfigError(fmt::format("--sync-every works with --nodes 2 or more and --mode {}",
                                  detail::mode_names_where(syncable)));
  if (nodes > 1) {
    if (!def.joins_nodes() && !syncs)
      throw ConfigError(fmt::format("--nodes {} works with --mode {}, or with --mode {} and "
                                    "--sync-every N|Ts (hogwild across nodes)", nodes,
                                    detail::mode_names_where(&detail::ModeDef::joins_nodes),
                                    detail::mode_names_where(syncable)));
    if (rendezvous.empty())
      throw ConfigError("--nodes needs --rendezvous file:DIR (a directory every node shares) or "
                        "redis://HOST:PORT");
    if (!gloo_built())
      throw ConfigError("--nodes: this build has no Gloo (install libgloo-dev and "
                        "libhiredis-dev, scripts/install-deps.sh, and build again)");
  }
  if (checkpoint_every > 0 && checkpoint.empty())
    throw ConfigError("--checkpoint-every needs --checkpoint FILE");
  if (!resume.empty() && !init_from.empty())  // (the checkpoint's weights won, silently)
    throw ConfigError("--init-from and --resume both give the starting weights: a resumed run "
                      "continues its checkpoint's; give one of them");
}

}  // namespace hogwild
