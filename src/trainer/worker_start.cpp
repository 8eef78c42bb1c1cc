#include "trainer/worker_start.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/cache_fd.hpp"
#include "modes/hogwild/layout_probe.hpp"
#include "device/kernel_registry.hpp"
#include "hogwild/error.hpp"
#include "hogwild/options.hpp"
#include "models/registry.hpp"
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

void start_fork_server(const std::string& program) {
  const bool lean = !detail::models_added() && !detail::device_kernels_added();
  detail::ForkServer::start(&detail::worker_entry, lean ? program.c_str() : nullptr);
}

int fork_server_main(int argc, char** argv) {
  // Only as ForkServer::start execs it: --socket FD --program PID.
  const auto number = [](const char* text) {  // -1 unless all of it is a number
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    return *end == '\0' && end != text ? n : -1;
  };
  long socket = -1, program = -1;
  if (argc == 5 && std::string_view(argv[1]) == "--socket" &&
      std::string_view(argv[3]) == "--program") {
    socket = number(argv[2]);
    program = number(argv[4]);
  }
  if (socket < 0 || socket > INT_MAX || program <= 0 || fcntl(static_cast<int>(socket), F_GETFD) < 0) {
    std::fprintf(stderr, "%s: the fork server of a hogwild program; it is started by "
                         "hogwild::start_fork_server(program), not by hand\n", argc > 0 ? argv[0] : "");
    return kExitBadInput;
  }
  detail::serve_forks(static_cast<int>(socket), &detail::worker_entry, static_cast<pid_t>(program));
}

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

std::string config_to_cbor(const TrainConfig& c) {
  const std::vector<std::uint8_t> bytes = json::to_cbor(config_json(c));
  return {bytes.begin(), bytes.end()};
}

TrainConfig config_from_cbor(std::string_view bytes) { return config_of(json::from_cbor(bytes)); }

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
  const std::vector<std::uint8_t> bytes = json::to_cbor(j);
  description_.assign(bytes.begin(), bytes.end());
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
  const json j = json::from_cbor(description);
  HOGWILD_ENFORCE(fds.size() == 2u + j.contains("test") + j.contains("device"),
                  "a worker's description and its descriptors disagree");
  TrainConfig cfg = config_of(j.at("config"));
  auto model = make_model(cfg.model, cfg.model_options);
  const Dataset train = open_cache_fd(fds[1], j.at("train").get<std::string>());
  if (cfg.mode == Mode::hogwild) mark_replicas_unsound(cfg, *model, train);
  std::optional<Dataset> test;
  if (j.contains("test")) test = open_cache_fd(fds[2], j.at("test").get<std::string>());
  Run run(cfg, *model, train, test ? &*test : nullptr, Arena::attach(fds[0]),
          j.contains("device") ? fds.back() : -1);
  return run.work(rank);
}

}  // namespace hogwild::detail
