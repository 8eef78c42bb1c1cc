#include "comm/rendezvous_store.hpp"

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <hiredis.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "hogwild/error.hpp"

namespace hogwild::detail {

using std::chrono::milliseconds;

Where parse_rendezvous(const std::string& text) {
  Where where;
  if (text.starts_with("file:") && text.size() > 5) {
    where.dir = text.substr(5);
    std::error_code ec;
    if (!std::filesystem::is_directory(where.dir, ec))
      throw ConfigError(fmt::format(
          "rendezvous '{}': directory '{}' does not exist (make it, on a file system every "
          "node shares)", text, where.dir));
    if (access(where.dir.c_str(), W_OK | X_OK) != 0)
      throw ConfigError(fmt::format("rendezvous '{}': directory '{}' is not writable: {}", text,
                                    where.dir, std::strerror(errno)));
    return where;
  }
  if (text.starts_with("redis://")) {
    const std::string rest = text.substr(8);
    const auto colon = rest.rfind(':');
    if (colon != std::string::npos) {
      where.host = rest.substr(0, colon);
      if (where.host.size() > 2 && where.host.front() == '[' && where.host.back() == ']')
        where.host = where.host.substr(1, where.host.size() - 2);  // [IPv6]
      const char* first = rest.data() + colon + 1;
      const char* last = rest.data() + rest.size();
      const auto [end, ec] = std::from_chars(first, last, where.port);
      if (!where.host.empty() && first != last && ec == std::errc() && end == last &&
          where.port > 0 && where.port < 65536)
        return where;
    }
  }
  throw ConfigError(fmt::format(
      "rendezvous '{}': expected file:DIR (a directory every node shares) or "
      "redis://HOST:PORT", text));
}

namespace {

timeval to_timeval(milliseconds t) {
  return {static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>(t.count() % 1000 * 1000)};
}

// Gloo's FileStore and RedisStore with KeyOps, and for redis a timeout on every
// command.
struct FileBackend final : gloo::rendezvous::FileStore, KeyOps {
  using FileStore::FileStore;
  bool check(const std::vector<std::string>& keys) override { return FileStore::check(keys); }
  bool erase(const std::string& key) override {
    ::unlink(objectPath(key).c_str());
    ::unlink(tmpPath(key).c_str());  // a set cut short
    return true;
  }
  // set(), but false when the key exists, atomically (FileStore::set checks, then
  // renames over whatever another process wrote meanwhile): link(2) does not
  // replace.
  bool claim(const std::string& key, const std::vector<char>& data) override {
    const std::string tmp = tmpPath(key) + "." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
      if (!out.flush()) throw gloo::IoException(fmt::format("cannot write {}", tmp));
    }
    const int rc = ::link(tmp.c_str(), objectPath(key).c_str());
    const int error = errno;
    ::unlink(tmp.c_str());
    if (rc == 0) return true;
    if (error == EEXIST) return false;
    throw gloo::IoException(fmt::format("cannot link {}: {}", objectPath(key), std::strerror(error)));
  }
  // A value is whole once its file is there (FileStore::set renames it into place).
  std::optional<std::vector<char>> read(const std::string& key) override {
    std::ifstream in(objectPath(key), std::ios::binary);
    if (!in) return std::nullopt;
    std::vector<char> value{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) throw gloo::IoException(fmt::format("cannot read {}", objectPath(key)));
    return value;
  }
};
struct RedisBackend final : gloo::rendezvous::RedisStore, KeyOps {
  RedisBackend(const std::string& host, int port, milliseconds timeout) : RedisStore(host, port) {
    redisSetTimeout(redis_, to_timeval(timeout));
  }
  bool check(const std::vector<std::string>& keys) override { return RedisStore::check(keys); }
  bool claim(const std::string& key, const std::vector<char>& data) override {
    auto* reply = static_cast<redisReply*>(
        redisCommand(redis_, "SETNX %b %b", key.data(), key.size(), data.data(), data.size()));
    if (reply == nullptr) throw gloo::IoException(redis_->errstr);
    const bool set = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    const std::string error = reply->type == REDIS_REPLY_ERROR ? reply->str : "";
    freeReplyObject(reply);
    if (!error.empty()) throw gloo::IoException(error);
    return set;
  }
  std::optional<std::vector<char>> read(const std::string& key) override {
    auto* reply =
        static_cast<redisReply*>(redisCommand(redis_, "GET %b", key.data(), key.size()));
    if (reply == nullptr) throw gloo::IoException(redis_->errstr);
    std::optional<std::vector<char>> value;
    std::string error;
    if (reply->type == REDIS_REPLY_STRING)
      value.emplace(reply->str, reply->str + reply->len);
    else if (reply->type == REDIS_REPLY_ERROR)
      error = reply->str;
    freeReplyObject(reply);
    if (!error.empty()) throw gloo::IoException(error);
    return value;
  }
  bool erase(const std::string& key) override {
    auto* reply = static_cast<redisReply*>(redisCommand(redis_, "DEL %b", key.data(), key.size()));
    if (reply == nullptr) return false;
    freeReplyObject(reply);
    return true;
  }
};

// gloo's RedisStore constructor leaks its connection when it fails and waits 2 s
// whatever the timeout: try a connection of our own first.
void check_reachable(const std::string& text, const Where& where, milliseconds timeout) {
  redisContext* c = redisConnectWithTimeout(where.host.c_str(), where.port, to_timeval(timeout));
  const std::string error = c == nullptr ? "out of memory" : c->err != 0 ? c->errstr : "";
  if (c != nullptr) redisFree(c);
  if (!error.empty())
    throw ConfigError(fmt::format("rendezvous '{}': cannot reach the redis server: {}", text, error));
}

}  // namespace

std::string without_location(const std::string& what) {
  if (what.starts_with('[')) {
    const auto end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}


KeyStore::KeyStore(const std::string& text, const Where& where, std::string prefix,
                 milliseconds timeout)
    : prefix_(std::move(prefix)), timeout_(timeout) {
  if (!where.dir.empty()) {
    auto files = std::make_unique<FileBackend>(where.dir);
    ops_ = files.get();
    backend_ = std::move(files);
    return;
  }
  check_reachable(text, where, timeout);
  try {
    auto redis = std::make_unique<RedisBackend>(where.host, where.port, timeout);
    ops_ = redis.get();
    backend_ = std::move(redis);
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("rendezvous '{}': {}", text, without_location(e.what())));
  }
}

KeyStore::~KeyStore() = default;
KeyStore::KeyStore(KeyStore&&) noexcept = default;

// The store of run options.run_id, tag options.tag, its waits bounded by `timeout`.
KeyStore open_store(const GlooOptions& options, milliseconds timeout) {
  return KeyStore(options.rendezvous, parse_rendezvous(options.rendezvous),
                  options.run_id + "/" + options.tag, timeout);
}


}  // namespace hogwild::detail
