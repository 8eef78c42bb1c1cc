#include "trainer/worker_start.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/cache_fd.hpp"
#include "hogwild/error.hpp"
#include "hogwild/options.hpp"
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

// Every option as its text (hogwild/options.hpp): the worker reads back exactly
// what the parent was given.
json config_json(const TrainConfig& c) {
  json j = json::object();
  for (const auto& o : train_options()) j[o.name] = o.get(c);
  return j;
}

TrainConfig config_of(const json& j) {
  TrainConfig c;
  for (const auto& o : train_options()) o.set(c, j.at(o.name).get<std::string>());
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
