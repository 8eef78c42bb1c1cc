#include "trainer/worker_start.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/cache_fd.hpp"
#include "hogwild/error.hpp"
#include "process.hpp"
#include "trainer/run.hpp"

namespace hogwild {

const char* to_string(WorkerStart s) noexcept {
  return s == WorkerStart::fork_server ? "fork-server" : "fork";
}

WorkerStart parse_worker_start(const std::string& name) {
  if (name == "fork") return WorkerStart::fork;
  if (name == "fork-server") return WorkerStart::fork_server;
  throw ConfigError(fmt::format("--worker-start must be fork or fork-server, not '{}'", name));
}

void start_fork_server() { detail::ForkServer::start(&detail::worker_entry); }

std::int32_t fork_server_pid() noexcept {
  const auto* s = detail::ForkServer::get();
  return s ? s->pid() : 0;
}

}  // namespace hogwild

namespace hogwild::detail {

using nlohmann::json;

namespace {

json config_json(const TrainConfig& c) {
  const ModelOptions& m = c.model_options;
  return json{
      {"model", c.model},
      {"model_options",
       {{"l2", m.l2}, {"bias", m.bias}, {"hidden", m.hidden}, {"rank", m.rank},
        {"matmul", static_cast<int>(m.matmul)}, {"factors", static_cast<int>(m.factors)}}},
      {"mode", c.mode.id()},
      {"mode_options", c.mode_options},
      {"optimizer", static_cast<int>(c.optimizer)},
      {"workers", c.workers},
      {"partition", static_cast<int>(c.partition)},
      {"epochs", c.epochs},
      {"step_size",
       {{"lr0", c.step_size.lr0}, {"decay", c.step_size.decay},
        {"inverse_scale", c.step_size.inverse_scale}}},
      {"batch", c.batch},
      {"merge_every", c.merge_every},
      {"hot_k", c.hot_k},
      {"hot_flush", c.hot_flush},
      {"accumulate", c.accumulate},
      {"bucket_bytes", c.bucket_bytes},
      {"comm_timeout", c.comm_timeout},
      {"comm", c.comm},
      {"nodes", c.nodes},
      {"node_rank", c.node_rank},
      {"rendezvous", c.rendezvous},
      {"iface", c.iface},
      {"run_id", c.run_id},
      {"sync_every", c.sync_every},
      {"sync_seconds", c.sync_seconds},
      {"telemetry", c.telemetry},
      {"telemetry_every", c.telemetry_every},
      {"conflicts", c.conflicts},
      {"conflict_k", c.conflict_k},
      {"grad_delay_ns", c.grad_delay_ns},
      {"straggler_worker", c.straggler_worker},
      {"straggler_factor", c.straggler_factor},
      {"seed", c.seed},
      {"eval_every", c.eval_every},
      {"shm_dir", c.shm_dir},
      {"pin", c.pin},
      {"huge_pages", c.huge_pages},
      {"max_restarts", c.max_restarts},
      {"checkpoint", c.checkpoint},
      {"checkpoint_every", c.checkpoint_every},
      {"resume", c.resume},
      {"result_parameters", c.result_parameters},
      {"handle_signals", c.handle_signals},
      {"worker_start", static_cast<int>(c.worker_start)},
      {"device", static_cast<int>(c.device)},
      {"servers", c.servers},
      {"push_every", c.push_every},
      {"fetch_every", c.fetch_every},
      {"staleness", c.staleness},
      {"hashed_keys", c.hashed_keys},
      {"cuda_ipc", static_cast<int>(c.cuda_ipc)},
      {"device_streams", c.device_streams},
      {"device_warps", c.device_warps},
  };
}

TrainConfig config_of(const json& j) {
  TrainConfig c;
  const json& m = j.at("model_options");
  j.at("model").get_to(c.model);
  m.at("l2").get_to(c.model_options.l2);
  m.at("bias").get_to(c.model_options.bias);
  m.at("hidden").get_to(c.model_options.hidden);
  m.at("rank").get_to(c.model_options.rank);
  c.model_options.matmul = static_cast<MatmulPrecision>(m.at("matmul").get<int>());
  c.model_options.factors = static_cast<Dtype>(m.at("factors").get<int>());
  c.mode = Mode(j.at("mode").get<std::uint8_t>());
  j.at("mode_options").get_to(c.mode_options);
  c.optimizer = static_cast<Optimizer>(j.at("optimizer").get<int>());
  j.at("workers").get_to(c.workers);
  c.partition = static_cast<Partition>(j.at("partition").get<int>());
  j.at("epochs").get_to(c.epochs);
  const json& s = j.at("step_size");
  s.at("lr0").get_to(c.step_size.lr0);
  s.at("decay").get_to(c.step_size.decay);
  s.at("inverse_scale").get_to(c.step_size.inverse_scale);
  j.at("batch").get_to(c.batch);
  j.at("merge_every").get_to(c.merge_every);
  j.at("hot_k").get_to(c.hot_k);
  j.at("hot_flush").get_to(c.hot_flush);
  j.at("accumulate").get_to(c.accumulate);
  j.at("bucket_bytes").get_to(c.bucket_bytes);
  j.at("comm_timeout").get_to(c.comm_timeout);
  j.at("comm").get_to(c.comm);
  j.at("nodes").get_to(c.nodes);
  j.at("node_rank").get_to(c.node_rank);
  j.at("rendezvous").get_to(c.rendezvous);
  j.at("iface").get_to(c.iface);
  j.at("run_id").get_to(c.run_id);
  j.at("sync_every").get_to(c.sync_every);
  j.at("sync_seconds").get_to(c.sync_seconds);
  j.at("telemetry").get_to(c.telemetry);
  j.at("telemetry_every").get_to(c.telemetry_every);
  j.at("conflicts").get_to(c.conflicts);
  j.at("conflict_k").get_to(c.conflict_k);
  j.at("grad_delay_ns").get_to(c.grad_delay_ns);
  j.at("straggler_worker").get_to(c.straggler_worker);
  j.at("straggler_factor").get_to(c.straggler_factor);
  j.at("seed").get_to(c.seed);
  j.at("eval_every").get_to(c.eval_every);
  j.at("shm_dir").get_to(c.shm_dir);
  j.at("pin").get_to(c.pin);
  j.at("huge_pages").get_to(c.huge_pages);
  j.at("max_restarts").get_to(c.max_restarts);
  j.at("checkpoint").get_to(c.checkpoint);
  j.at("checkpoint_every").get_to(c.checkpoint_every);
  j.at("resume").get_to(c.resume);
  j.at("result_parameters").get_to(c.result_parameters);
  j.at("handle_signals").get_to(c.handle_signals);
  c.worker_start = static_cast<WorkerStart>(j.at("worker_start").get<int>());
  c.device = static_cast<Device>(j.at("device").get<int>());
  j.at("servers").get_to(c.servers);
  j.at("push_every").get_to(c.push_every);
  j.at("fetch_every").get_to(c.fetch_every);
  j.at("staleness").get_to(c.staleness);
  j.at("hashed_keys").get_to(c.hashed_keys);
  c.cuda_ipc = static_cast<CudaIpc>(j.at("cuda_ipc").get<int>());
  c.device_streams = j.at("device_streams").get<unsigned>();
  c.device_warps = j.at("device_warps").get<unsigned>();
  return c;
}

}  // namespace

std::string config_to_json(const TrainConfig& c) { return config_json(c).dump(); }

TrainConfig config_from_json(std::string_view text) { return config_of(json::parse(text)); }

WorkerDescription::WorkerDescription(const Run& run) {
  json j{{"config", config_json(run.cfg)}, {"train", run.train.source()}};
  fds_.push_back(run.arena.handle());
  owned_.push_back(cache_memfd(run.train));
  if (run.test) {
    j["test"] = run.test->source();
    owned_.push_back(cache_memfd(*run.test));
  }
  fds_.insert(fds_.end(), owned_.begin(), owned_.end());
  if (run.store->handle() >= 0) {  // the device arena's (VMM), the arena's to close
    j["device"] = true;
    fds_.push_back(run.store->handle());
  }
  description_ = j.dump();
}

WorkerDescription::~WorkerDescription() {
  for (int fd : owned_) ::close(fd);
}

int worker_entry(unsigned rank, std::string_view description, std::span<const int> fds) {
  struct Closer {  // the descriptors are this worker's; what it maps stays mapped
    std::span<const int> fds;
    ~Closer() {
      for (int fd : fds) ::close(fd);
    }
  } closer{fds};
  const json j = json::parse(description);
  HOGWILD_ENFORCE(fds.size() == 2u + j.contains("test") + j.contains("device"),
                  "a worker's description and its descriptors disagree");
  const TrainConfig cfg = config_of(j.at("config"));
  auto model = make_model(cfg.model, cfg.model_options);
  const Dataset train = open_cache_fd(fds[1], j.at("train").get<std::string>());
  std::optional<Dataset> test;
  if (j.contains("test")) test = open_cache_fd(fds[2], j.at("test").get<std::string>());
  Run run(cfg, *model, train, test ? &*test : nullptr, Arena::attach(fds[0]),
          j.contains("device") ? fds.back() : -1);
  return run.work(rank);
}

}  // namespace hogwild::detail
