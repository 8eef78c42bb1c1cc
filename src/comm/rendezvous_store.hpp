// The rendezvous store the ranks of a group meet in, a directory every node shares
// (file:DIR, Gloo's FileStore) or a redis server (redis://HOST:PORT, Gloo's
// RedisStore), and the keys a run writes there: what the Gloo backend
// (comm/gloo.cpp) and the NCCL id's exchange across machines
// (comm/nccl_rendezvous.cpp) share. Built with Gloo only.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/common/error.h>

#include "comm/gloo.hpp"

namespace hogwild::detail {

// Where the ranks meet: a directory (file:DIR) or a redis server (redis://HOST:PORT).
struct Where {
  std::string dir;
  std::string host;
  int port = 0;
};

// ConfigError when `text` is neither, or its directory is not there or not writable.
Where parse_rendezvous(const std::string& text);

// "[gloo/x.cc:12] Timed out ..." -> "Timed out ...".
std::string without_location(const std::string& what);

// The keys: a rank's membership, its reports, and a group's NCCL id (or rank 0's
// reason for having none).
inline std::string member_key(unsigned rank) { return fmt::format("hogwild/member/{}", rank); }
inline constexpr const char* kNcclIdKey = "hogwild/nccl-id";
inline constexpr const char* kNcclIdErrorKey = "hogwild/nccl-id-error";
inline std::string report_key(std::string_view kind, unsigned rank) {
  return fmt::format("hogwild/{}/{}", kind, rank);
}

// What KeyStore needs beyond gloo's Store, from either backend.
struct KeyOps {
  virtual ~KeyOps() = default;
  // True when every key is there (no wait).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // False when the store did not answer.
  virtual bool erase(const std::string& key) = 0;
  // set(), but false when the key is there, atomically.
  virtual bool claim(const std::string& key, const std::vector<char>& data) = 0;
  // The key's value, or nullopt when it is not there (no wait: gloo's get waits 30 s
  // for a key that another node erased after a check found it).
  virtual std::optional<std::vector<char>> read(const std::string& key) = 0;
};


// The rendezvous store of one communicator: gloo's FileStore or RedisStore under the
// prefix "RUN_ID/TAG/", with waits bounded to the millisecond by the communicator's
// timeout (gloo's count whole seconds, and wait 30 s when given none) and a check
// that does not wait. Not thread-safe (hiredis is not): the communicator locks.
class KeyStore final : public gloo::rendezvous::Store {
 public:
  // The store at `where` (parse_rendezvous of `text`, for messages), keys under
  // `prefix`. ConfigError when it cannot be reached.
  KeyStore(const std::string& text, const Where& where, std::string prefix,
           std::chrono::milliseconds timeout);
  ~KeyStore() override;
  KeyStore(KeyStore&&) noexcept;

  void set(const std::string& key, const std::vector<char>& data) override {
    backend_->set(join(key), data);
  }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    auto value = ops_->read(join(key));
    if (!value)
      throw gloo::IoException(fmt::format("key {} left the rendezvous store", key));
    return std::move(*value);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> joined;
    for (const auto& key : keys) joined.push_back(join(key));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!ops_->check(joined)) {
      if (std::chrono::steady_clock::now() >= deadline)
        throw gloo::IoException(fmt::format("keys {} did not appear in the rendezvous store "
                                            "within {} ms", fmt::join(keys, ", "), timeout.count()));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  bool has(const std::string& key) { return ops_->check({join(key)}); }
  // False when the store did not answer (redis).
  bool erase(const std::string& key) { return ops_->erase(join(key)); }
  // Sets `key` unless it is there (then false), atomically.
  bool claim(const std::string& key, const std::vector<char>& data) {
    return ops_->claim(join(key), data);
  }
  // The value of `key`, or nullopt when it is not there or the store fails.
  std::optional<std::string> find(const std::string& key) noexcept {
    try {
      const auto value = ops_->read(join(key));
      if (!value) return std::nullopt;
      return std::string(value->begin(), value->end());
    } catch (...) {
      return std::nullopt;
    }
  }

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }

  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<gloo::rendezvous::Store> backend_;
  KeyOps* ops_ = nullptr;  // backend_, as KeyOps
};

// The store of run options.run_id, tag options.tag, its waits bounded by `timeout`.
KeyStore open_store(const GlooOptions& options, std::chrono::milliseconds timeout);

}  // namespace hogwild::detail
