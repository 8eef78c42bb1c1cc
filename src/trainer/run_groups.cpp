// The groups a run's workers meet in: this node's workers (the arena's
// communicator, or Gloo over loopback), the workers of one local rank on every node
// (Gloo through the rendezvous store, the join checked), every rank on the device
// (NCCL), and the nodes' join before any worker starts.
#include "trainer/run.hpp"

#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <zlib.h>

#include "comm/gloo.hpp"
#include "comm/interfaces.hpp"
#include "comm/shm.hpp"
#include "device/device_backend.hpp"
#include "hogwild/options.hpp"

namespace hogwild::detail {

namespace {

// Where group `rank` of generation `generation` meets across nodes: the store, the
// run id, the tag (what every process of every node computes alike).
GlooOptions group_options(const TrainConfig& cfg, unsigned rank, std::uint32_t generation) {
  GlooOptions o;
  o.rendezvous = cfg.rendezvous;
  o.run_id = fmt::format("{}-{}", cfg.run_id.empty() ? "hogwild" : cfg.run_id, generation);
  o.node = fmt::format("node {}", cfg.node_rank);
  o.tag = fmt::format("slice-{}", rank);
  o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.comm_timeout * 1000));
  return o;
}

// The nodes' join keys of generation `generation`, owned by this parent.
GlooOptions join_options_of(const TrainConfig& cfg, std::uint32_t generation, pid_t parent) {
  GlooOptions o = group_options(cfg, 0, generation);
  o.tag = "join";
  o.owner = fmt::format("{}.join", parent);
  o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.join_timeout * 1000));
  return o;
}

// --device cuda: the mode's device steps compute gradients, which the ranks sum and
// apply (its device part, over the world group), instead of writing the weights.
bool device_gradients(const ModeDef& mode) {
  return mode.device_access() == DeviceAccess::gradient;
}

}  // namespace

// Several nodes, no --run-id: the run's generation is the first whose first group
// (worker 0's, or with a parameter server server 0's: rank `first_rank`) not every
// node joined before (earlier runs through the same store used the ones before, and
// every node skips the same ones).
std::uint32_t first_free_generation(const TrainConfig& cfg, unsigned first_rank) {
  std::uint32_t g = 0;
  if (cfg.run_id.empty())
    while (gloo_run_id_used(group_options(cfg, first_rank, g), cfg.nodes)) ++g;
  return g;
}

Run::AcrossKeys::~AcrossKeys() {
  if (run == nullptr) return;
  const auto timeout = run->comm_timeout();
  // A failed run: the other nodes' workers read this node's reports for up to a
  // second (GlooCommunicator::origin) before they exit.
  if (std::uncaught_exceptions() > 0)
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(1)));
  gloo_leave_join(run->join_options(), run->cfg.node_rank, run->cfg.nodes);
  for (std::uint32_t g = first_generation; g <= run->control->generation; ++g) {
    for (unsigned r = 0; r < run->workers + run->servers; ++r)
      if (!gloo_erase_run(run->across_options(r, g), run->cfg.node_rank, run->cfg.nodes))
        return;  // the store is out of reach
    if (run->cfg.device == Device::cuda && device_gradients(run->mode) &&
        !gloo_erase_run(run->world_options(g), run->global_rank(0), run->world()))
      return;
  }
}

std::unique_ptr<Communicator> Run::make_communicator(unsigned rank) const {
  // Across nodes a local collective may wait on a rank that is in one with the other
  // nodes, which fails after the timeout and up to a second's wait for its peers'
  // reports (Gloo's): the local wait is longer, so that the failure across nodes,
  // which names the peer, is the one reported.
  const auto timeout = comm_timeout() + std::chrono::milliseconds(cfg.nodes > 1 ? 2000 : 0);
  if (cfg.comm == "gloo") {
    GlooOptions o;
    o.rendezvous = std::string("file:") + control->rendezvous;
    o.run_id = fmt::format("group-{}", control->generation);
    o.node = "this machine";
    o.timeout = timeout;
    return make_gloo_communicator(o, rank, workers);
  }
  return std::make_unique<ShmCommunicator>(arena.block("comm"), rank, workers, timeout,
                                           &control->stop);
}

GlooOptions Run::across_options(unsigned rank, std::uint32_t generation) const {
  GlooOptions o = group_options(cfg, rank, generation);
  o.iface = control->iface[0] ? std::string(control->iface) : cfg.iface;
  o.owner = fmt::format("{}.{}", control->parent, control->start_ns);
  return o;
}

GlooOptions Run::world_options(std::uint32_t generation) const {
  GlooOptions o = across_options(0, generation);
  o.tag = "world";
  return o;
}

std::unique_ptr<Communicator> Run::make_across(unsigned rank) const {
  if (cfg.nodes <= 1) return nullptr;
  return make_gloo_communicator(across_options(rank, control->generation), cfg.node_rank,
                                cfg.nodes);
}

void Run::check_join(Communicator& across) const {
  const std::string text = join_text();
  const auto mine = static_cast<std::uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
  const IndexValue me{mine, static_cast<float>(cfg.node_rank)};
  const auto all = across.all_gather(std::span<const IndexValue>(&me, 1));
  for (const IndexValue& other : all)
    if (other.index != all[0].index)
      throw ConfigError(fmt::format(
          "node {} was started with other options or data than node 0 (fingerprints {:08x} and "
          "{:08x}): start every node with the same options and data, and its own --node-rank",
          static_cast<unsigned>(other.value), other.index, all[0].index));
}

GlooOptions Run::join_options() const {
  return join_options_of(cfg, across_keys.first_generation, control->parent);
}

bool Run::join_nodes() {
  const auto t0 = std::chrono::steady_clock::now();
  const auto nodes = gloo_join_nodes(join_options(), cfg.node_rank, cfg.nodes, join_text(),
                                     &control->stop);
  join_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (nodes.empty()) return false;
  // The interface: the one given; none on one machine (loopback); else the one
  // whose network reaches every other machine.
  std::string iface = cfg.iface;
  const JoinedNode& me = nodes[cfg.node_rank];
  std::vector<std::vector<InterfaceAddress>> peers;
  std::string elsewhere;
  for (unsigned r = 0; r < nodes.size(); ++r)
    if (nodes[r].machine != me.machine) {
      peers.push_back(parse_addresses(nodes[r].addresses));
      elsewhere += fmt::format("{}node {} (host {}: {})", elsewhere.empty() ? "" : ", ", r,
                               nodes[r].hostname,
                               nodes[r].addresses.empty() ? "no address" : nodes[r].addresses);
    }
  if (iface.empty() && !peers.empty()) {
    iface = interface_toward(parse_addresses(me.addresses), peers);
    if (iface.empty()) {
      const std::string why = fmt::format(
          "node {} (host {}: {}) has no network interface on a network with {}: pass --iface "
          "(the interface the machines reach each other on) on every node",
          cfg.node_rank, me.hostname, me.addresses.empty() ? "no address" : me.addresses,
          elsewhere);
      gloo_join_failed(join_options(), cfg.node_rank, why);
      throw ConfigError(why);
    }
  }
  if (iface.size() >= sizeof control->iface)
    throw ConfigError(fmt::format("--iface {}: an interface name is at most {} characters", iface,
                                  sizeof control->iface - 1));
  std::memcpy(control->iface, iface.c_str(), iface.size() + 1);
  return true;
}

std::string Run::join_text() const {
  // What a resume must match (the workers as the mode resolves them), then the
  // options declared nodes_must_match, then the data.
  std::string s;
  for (const auto& [option, value] : config_fingerprint(cfg))
    if (option != "--node-rank" && option != "--iface" && option != "--worker-start")
      s += option + "=" + value + "\n";
  for (const OptionInfo& o : train_options())
    if (o.nodes_must_match && !o.resume_must_match) s += "--" + o.name + "=" + o.get(cfg) + "\n";
  return s + "data=" + data_fingerprint().describe() + "\n";
}

std::unique_ptr<Communicator> Run::device_communicator(unsigned rank) {
  const auto timeout = comm_timeout();
  // Across nodes: the same options and data everywhere (through the group of this
  // local rank on every node), and rank 0's id through the rendezvous store.
  if (cfg.nodes > 1) {
    local.across = make_across(rank);
    check_join(*local.across);
  }
  const NcclIdExchange exchange = [&](char (&id)[128], const auto& make) {
    if (cfg.nodes > 1)
      store_exchange_nccl_id(across_options(0, control->generation), global_rank(rank), id,
                            make, &control->stop);
    else
      exchange_nccl_id(*reinterpret_cast<NcclIdSlot*>(arena.block("nccl_id").data()), rank, id,
                       make, timeout, &control->stop);
  };
  auto comm = device_backend().communicator(global_rank(rank), world(), static_cast<int>(rank),
                                            exchange, timeout, &control->stop);
  if (comm) return comm;
  // A backend over host memory: the run's own communicator (every rank of every node
  // in one Gloo group across nodes).
  return cfg.nodes > 1
             ? make_gloo_communicator(world_options(control->generation), global_rank(rank), world())
             : make_communicator(rank);
}

}  // namespace hogwild::detail

namespace hogwild {

void tell_nodes_failed(const TrainConfig& cfg, const std::string& why) noexcept {
  if (cfg.nodes <= 1 || cfg.rendezvous.empty() || !gloo_built()) return;
  try {
    const auto& mode = detail::mode_def(cfg.mode);
    const unsigned workers = mode.parallel() ? cfg.workers : 1;
    const GlooOptions o = detail::join_options_of(
        cfg, detail::first_free_generation(cfg, mode.services(cfg) ? workers : 0), ::getpid());
    gloo_join_failed(o, cfg.node_rank, why);
    // The nodes waiting to join this one look every 20 ms; a later run must not
    // find this failure.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    gloo_leave_join(o, cfg.node_rank, cfg.nodes);
  } catch (...) {
  }
}

}  // namespace hogwild
