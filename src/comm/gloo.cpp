#include "comm/gloo.hpp"

#include <fmt/format.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <hiredis.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "comm/interfaces.hpp"
#include "comm/rendezvous_store.hpp"
#include "hogwild/error.hpp"

namespace hogwild {
namespace detail {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// The reduce-scatter's receive buffers, and the least segment it cuts chunks into.
constexpr std::size_t kReceiveBytes = std::size_t{4} << 20;
constexpr std::size_t kMinSegmentBytes = std::size_t{64} << 10;
// How long a failed rank waits for the others' reports (each live rank writes one
// as soon as it sees the failure) before it names those without one.
constexpr milliseconds kReportGrace{1000};

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A member key's value, "HOST\nNODE\nOWNER\nADDRESS": its four lines (missing ones empty).
std::array<std::string, 4> member_lines(const std::string& text) {
  std::array<std::string, 4> lines;
  std::size_t begin = 0;
  for (auto& line : lines) {
    if (begin > text.size()) break;
    const auto end = std::min(text.find('\n', begin), text.size());
    line = text.substr(begin, end - begin);
    begin = end + 1;
  }
  return lines;
}

// Gloo's words for a peer that did not answer in time or could not be reached over
// the network (not one that closed its connections: that peer's process ended).
bool network_failure(const std::string& what) {
  for (const char* words : {"Timed out", "Connect timeout", "Network is unreachable",
                            "No route to host", "Connection timed out", "Host is unreachable"})
    if (what.find(words) != std::string::npos) return true;
  return false;
}

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

}  // namespace

namespace {

// The TCP device: its listening address is on `iface`, loopback when none is given.
std::shared_ptr<gloo::transport::Device> make_device(const std::string& iface) {
  gloo::transport::tcp::attr attr;
  attr.iface = iface.empty() ? "lo" : iface;
  if (if_nametoindex(attr.iface.c_str()) == 0)
    throw ConfigError(fmt::format(
        "network interface '{}' does not exist (`ip -brief address` lists them)", attr.iface));
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("network interface '{}' cannot carry Gloo's connections: {}",
                                  attr.iface, without_location(e.what())));
  }
}

// A write to a peer that is gone must fail with EPIPE, not kill this rank: Gloo
// writes with writev(2), so SIGPIPE is ignored here (as Gloo's own tests do), unless
// the program handles it.
void ignore_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

}  // namespace

GlooCommunicator::GlooCommunicator(const GlooOptions& options, unsigned rank, unsigned size)
    : Communicator(options.timeout), rank_(rank), size_(size), nodes_(size) {
  if (size == 0 || rank >= size)
    throw ConfigError(fmt::format("Gloo: rank {} of {} ranks does not exist", rank, size));
  if (options.run_id.empty())
    throw ConfigError("Gloo: a run id is needed (it keeps runs that share a rendezvous apart)");
  if (options.timeout <= milliseconds(0))
    throw ConfigError(fmt::format("Gloo: timeout {} ms: must be positive", options.timeout.count()));
  nodes_[rank] = options.node;
  const Where where = parse_rendezvous(options.rendezvous);
  const std::string prefix = options.run_id + "/" + options.tag;
  try {
    store_ = std::make_unique<KeyStore>(options.rendezvous, where, prefix, timeout_);
    device_ = make_device(options.iface);
    ignore_sigpipe();
    // Every rank says who it is (host, node, owner, address), then waits for the others.
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    if (!store_->claim(member_key(rank),
                       bytes(fmt::format("{}\n{}\n{}\n{}", host, options.node, options.owner,
                                         interface_address(options.iface)))))
      throw ConfigError(fmt::format(
          "run id '{}'{} was already used with rendezvous '{}': give each run its own (or two "
          "nodes were given the same --node-rank)",
          options.run_id, options.tag.empty() ? "" : " (tag '" + options.tag + "')",
          options.rendezvous));
    std::vector<std::string> keys;
    for (unsigned r = 0; r < size; ++r) keys.push_back(member_key(r));
    try {
      store_->wait(keys);
    } catch (const gloo::IoException&) {
      std::vector<unsigned> missing;
      for (unsigned r = 0; r < size; ++r)
        if (!store_->has(member_key(r))) missing.push_back(r);
      throw CommError(fmt::format("{}: rank(s) {} did not join run '{}' through '{}' within {} ms",
                                  describe(rank), fmt::join(missing, ", "), options.run_id,
                                  options.rendezvous, timeout_.count()));
    }
    hosts_.resize(size);
    addresses_.resize(size);
    for (unsigned r = 0; r < size; ++r) {
      const auto value = store_->get(member_key(r));
      const std::string text(value.begin(), value.end());
      const auto lines = member_lines(text);
      hosts_[r] = lines[0];
      nodes_[r] = lines[1];
      addresses_[r] = lines[3];
    }
    if (options.iface.empty())
      for (unsigned r = 0; r < size; ++r)
        if (hosts_[r] != hosts_[rank])
          throw ConfigError(fmt::format(
              "Gloo: {} runs on {} and {} on {}, but no network interface was given: pass "
              "--iface (the interface the machines reach each other on) on every node; without "
              "it the ranks listen on loopback only",
              describe(rank), hosts_[rank], describe(r), hosts_[r]));

    auto context = std::make_shared<gloo::rendezvous::Context>(static_cast<int>(rank),
                                                               static_cast<int>(size));
    context->setTimeout(timeout_);
    context->connectFullMesh(*store_, device_);
    context_ = std::move(context);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string what = without_location(e.what());
    const auto remote = addresses_.empty() ? std::vector<unsigned>{} : remote_ranks();
    if (!remote.empty() && network_failure(what)) {
      throw PeerUnreachable(fmt::format(
          "{}: cannot connect to {} within {} ms (--comm-timeout): {} (the link between the "
          "nodes is down, or that node is)", describe(rank), locate(remote),
          timeout_.count(), what));
    }
    throw CommError(fmt::format("{}: connecting to the other ranks of run '{}' failed: {}",
                                describe(rank), options.run_id, what));
  }
}

GlooCommunicator::~GlooCommunicator() = default;

std::string GlooCommunicator::describe(unsigned rank) const {
  return nodes_[rank].empty() ? fmt::format("rank {}", rank)
                              : fmt::format("rank {} ({})", rank, nodes_[rank]);
}

std::string GlooCommunicator::locate(unsigned rank) const {
  return fmt::format("{} (host {}, {})", nodes_[rank].empty() ? fmt::format("rank {}", rank) : nodes_[rank],
                     hosts_[rank], addresses_[rank].empty() ? "no address" : addresses_[rank]);
}

std::string GlooCommunicator::locate(const std::vector<unsigned>& ranks) const {
  std::vector<std::string> each;
  for (unsigned r : ranks) each.push_back(locate(r));
  return fmt::format("{}", fmt::join(each, ", "));
}

std::vector<unsigned> GlooCommunicator::remote_ranks() const {
  std::vector<unsigned> out;
  for (unsigned r = 0; r < size_; ++r)
    if (addresses_[r] != addresses_[rank_] && !addresses_[r].starts_with("127."))
      out.push_back(r);
  return out;
}

void GlooCommunicator::throw_broken(const char* name) const {
  const auto what = fmt::format("{}: {} failed: {}", describe(rank_), name, broken_);
  if (unreachable_) throw PeerUnreachable(what);
  throw CommError(what);
}

template <class Fn>
void GlooCommunicator::collective(const char* name, Fn&& fn) {
  {
    std::lock_guard lock(mutex_);
    if (!broken_.empty()) throw_broken(name);
  }
  try {
    fn();
  } catch (const std::exception& e) {  // gloo::IoException, gloo::EnforceNotMet, ...
    fail(name, e.what());
  }
}

void GlooCommunicator::fail(const char* name, const std::string& what) {
  std::lock_guard lock(mutex_);
  if (broken_.empty()) {
    // First the report (this rank is alive and saw `what`), then the pairs close, so
    // that the peers fail now rather than at their timeout, and find the report.
    try {
      store_->set(report_key("seen", rank_), bytes(without_location(what)));
    } catch (...) {
    }
    close_pairs();
    broken_ = origin(what);
  }
  throw_broken(name);
}

std::string GlooCommunicator::origin(const std::string& what) {
  auto aborted = [&]() -> std::optional<std::string> {
    for (unsigned r = 0; r < size_; ++r)
      if (auto report = store_->find(report_key("abort", r))) return report;
    return std::nullopt;
  };
  // The ranks that have not reported: all but this one, at first.
  std::vector<unsigned> silent;
  for (unsigned r = 0; r < size_; ++r)
    if (r != rank_) silent.push_back(r);
  const auto grace = std::min(kReportGrace, timeout_);
  const auto deadline = Clock::now() + grace;
  while (true) {
    if (auto report = aborted()) return *report;
    std::erase_if(silent, [&](unsigned r) { return store_->find(report_key("seen", r)).has_value(); });
    if (silent.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  // A timeout or a failed connection to ranks on other machines: the ranks there
  // that did not report are down or out of reach; those that did are running, and
  // timed out too, so the link between is down (a restart would wait again).
  const auto remote = remote_ranks();
  if (network_failure(what) && !remote.empty()) {
    std::vector<unsigned> quiet;
    for (unsigned r : remote)
      if (std::find(silent.begin(), silent.end(), r) != silent.end()) quiet.push_back(r);
    unreachable_ = true;
    return fmt::format(
        "no answer from {} within {} ms (--comm-timeout), {} ({} saw: {})",
        locate(quiet.empty() ? remote : quiet),
        timeout_.count(),
        quiet.empty() ? "which is running and timed out too: the link between the nodes is down"
                      : fmt::format("which did not report within {} ms either: the link between "
                                    "the nodes is down, or that node is down or stuck",
                                    grace.count()),
        describe(rank_), without_location(what));
  }
  if (silent.empty()) return fmt::format("{} saw: {}", describe(rank_), without_location(what));
  std::vector<std::string> names;
  for (unsigned r : silent) names.push_back(describe(r));
  return fmt::format(
      "{} did not report within {} ms: gone (killed, or exited without abort) or stuck ({} "
      "saw: {})", fmt::join(names, ", "), grace.count(), describe(rank_), without_location(what));
}

std::uint64_t GlooCommunicator::next_slot() {
  // Gloo's collectives use prefixes 1 to 8 in the top byte, and gloo::Context's
  // nextSlot() an int that a long run of small collectives would overflow.
  constexpr std::uint64_t kOurs = std::uint64_t{'H'} << 56;
  return kOurs | (collectives_++ & ((std::uint64_t{1} << 56) - 1));
}

void GlooCommunicator::close_pairs() noexcept {
  try {
    // Gloo's own reaction to a wait that times out: every wait on the context's
    // pairs throws, their sockets close. A wait of 0 ms on a buffer with nothing
    // to receive sets it off.
    context_->createUnboundBuffer(nullptr, 0)->waitRecv(milliseconds(0));
  } catch (...) {
  }
}

void GlooCommunicator::abort(std::string_view why) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (!broken_.empty()) return;  // failed already: the peers learn the cause from that
    broken_ = fmt::format("{} aborted: {}", describe(rank_), why);
    try {
      store_->set(report_key("abort", rank_), bytes(broken_));
    } catch (...) {
    }
    close_pairs();
  } catch (...) {
  }
}

// The reduce-scatter, direct: rank r sends segment j of each other rank's chunk
// (slice_of) to that rank and receives segment j of its own chunk from every peer,
// then sums the ranks' copies in rank order, as the shared-memory backend does (the
// same floats from either backend, whichever rank sums). Each peer's segment is at
// most kReceiveBytes / (2 size): two segments in flight, one received while the
// other is summed. The sends, from the other chunks, are all posted at once.
template <class T>
void GlooCommunicator::reduce(std::span<T> data, Reduce op) {
  const std::size_t n = data.size(), p = size_;
  if (n == 0 || p == 1) return;
  const std::size_t per = slice_of(n, 0, size_).size();  // the longest slice
  const std::size_t segment =
      std::min(per, std::max(kMinSegmentBytes, kReceiveBytes / (2 * p)) / sizeof(T));
  const Slice own = slice_of(n, rank_, size_);
  auto part = [&](Slice chunk, std::size_t j) {
    const std::size_t begin = std::min(chunk.end, chunk.begin + j * segment);
    return Slice{begin, std::min(chunk.end, begin + segment)};
  };
  const auto copies = std::make_unique_for_overwrite<T[]>(2 * p * segment);  // [j % 2][rank][segment]
  const auto slot = next_slot();
  auto out = context_->createUnboundBuffer(data.data(), n * sizeof(T));
  std::unique_ptr<gloo::transport::UnboundBuffer> in[2];
  for (int h = 0; h < 2; ++h)
    in[h] = context_->createUnboundBuffer(copies.get() + h * p * segment, p * segment * sizeof(T));

  const std::size_t segments = ceil_div(per, segment);
  std::size_t sends = 0;
  for (std::size_t j = 0; j < segments; ++j)
    for (unsigned d = 0; d < p; ++d) {
      const Slice q = part(slice_of(n, d, size_), j);
      if (d == rank_ || q.size() == 0) continue;
      out->send(static_cast<int>(d), slot, q.begin * sizeof(T), q.size() * sizeof(T));
      ++sends;
    }
  auto receive = [&](std::size_t j) {
    const Slice q = part(own, j);
    for (unsigned r = 0; r < p && q.size() > 0; ++r)
      if (r != rank_)
        in[j % 2]->recv(static_cast<int>(r), slot, r * segment * sizeof(T), q.size() * sizeof(T));
  };
  receive(0);
  for (std::size_t j = 0; j < segments; ++j) {
    if (j + 1 < segments) receive(j + 1);
    const Slice q = part(own, j);
    if (q.size() == 0) continue;
    for (std::size_t k = 1; k < p; ++k) in[j % 2]->waitRecv(timeout_);
    T* copy = copies.get() + j % 2 * p * segment;
    T* sum = data.data() + q.begin;
    std::copy(sum, sum + q.size(), copy + rank_ * segment);
    std::copy(copy, copy + q.size(), sum);
    for (std::size_t r = 1; r < p; ++r)
      for (std::size_t i = 0; i < q.size(); ++i) sum[i] += copy[r * segment + i];
    if (op == Reduce::mean)
      for (std::size_t i = 0; i < q.size(); ++i) sum[i] /= static_cast<T>(p);
  }
  for (std::size_t k = 0; k < sends; ++k) out->waitSend(timeout_);
}

// Each rank's slice (slice_of) to every rank, in place.
template <class T>
void GlooCommunicator::gather(std::span<T> data) {
  std::vector<Slice> parts(size_);
  for (unsigned r = 0; r < size_; ++r) {
    const Slice s = slice_of(data.size(), r, size_);
    parts[r] = {s.begin * sizeof(T), s.end * sizeof(T)};
  }
  gather_parts(std::as_writable_bytes(data), parts);
}

// The all-gather, direct: rank r's part of `data` (bytes) goes to every other rank
// in segments, and each other part is received where it belongs; every send and
// receive is posted at once.
void GlooCommunicator::gather_parts(std::span<std::byte> data, const std::vector<Slice>& parts) {
  if (data.empty() || size_ == 1) return;
  const std::size_t segment = std::max(kMinSegmentBytes, kReceiveBytes / (2 * size_));
  const auto slot = next_slot();
  auto buffer = context_->createUnboundBuffer(data.data(), data.size());
  std::size_t sends = 0, receives = 0;
  for (unsigned r = 0; r < size_; ++r)
    for (std::size_t at = parts[r].begin; at < parts[r].end; at += segment) {
      const std::size_t bytes = std::min(segment, parts[r].end - at);
      if (r != rank_) {
        buffer->recv(static_cast<int>(r), slot, at, bytes);
        ++receives;
        continue;
      }
      for (unsigned d = 0; d < size_; ++d)
        if (d != rank_) {
          buffer->send(static_cast<int>(d), slot, at, bytes);
          ++sends;
        }
    }
  for (std::size_t k = 0; k < receives; ++k) buffer->waitRecv(timeout_);
  for (std::size_t k = 0; k < sends; ++k) buffer->waitSend(timeout_);
}

void GlooCommunicator::all_reduce(std::span<float> data, Reduce op) {
  collective("all_reduce", [&] { reduce(data, op); gather(data); });
}
void GlooCommunicator::all_reduce(std::span<double> data, Reduce op) {
  collective("all_reduce", [&] { reduce(data, op); gather(data); });
}
void GlooCommunicator::reduce_scatter(std::span<float> data) {
  collective("reduce_scatter", [&] { reduce(data, Reduce::sum); });
}
void GlooCommunicator::reduce_scatter(std::span<double> data) {
  collective("reduce_scatter", [&] { reduce(data, Reduce::sum); });
}
void GlooCommunicator::all_gather(std::span<float> data) {
  collective("all_gather", [&] { gather(data); });
}
void GlooCommunicator::all_gather(std::span<double> data) {
  collective("all_gather", [&] { gather(data); });
}
std::vector<IndexValue> GlooCommunicator::all_gather(std::span<const IndexValue> mine) {
  std::vector<IndexValue> all;
  collective("all_gather", [&] {
    // The lengths first, then the lists.
    std::vector<std::uint64_t> lengths(size_);
    lengths[rank_] = mine.size();
    std::vector<Slice> parts(size_);
    for (unsigned r = 0; r < size_; ++r) parts[r] = {r * sizeof(std::uint64_t), (r + 1) * sizeof(std::uint64_t)};
    gather_parts(std::as_writable_bytes(std::span<std::uint64_t>(lengths)), parts);
    std::size_t total = 0;
    for (unsigned r = 0; r < size_; ++r) {
      parts[r] = {total * sizeof(IndexValue), (total + lengths[r]) * sizeof(IndexValue)};
      total += lengths[r];
    }
    all.resize(total);
    std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(parts[rank_].begin / sizeof(IndexValue)));
    gather_parts(std::as_writable_bytes(std::span<IndexValue>(all)), parts);
  });
  return all;
}

void GlooCommunicator::broadcast(std::span<std::byte> data, unsigned root) {
  HOGWILD_ENFORCE_LT(root, size_);
  collective("broadcast", [&] {
    if (data.empty() || size_ == 1) return;
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(reinterpret_cast<unsigned char*>(data.data()), data.size());
    opts.setRoot(static_cast<int>(root));
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

void GlooCommunicator::barrier() {
  collective("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  });
}

// Each message as two: its length (8 bytes) on one slot, then its bytes on the
// next. All sends are posted first; then the lengths are received from any rank not
// yet heard from in this exchange, each followed by that rank's bytes; then the
// sends complete. The slots are this exchange's own, so a fast peer's next
// exchange is never taken for this one.
std::vector<std::vector<std::byte>> GlooCommunicator::exchange(
    const std::vector<std::vector<std::byte>>& outgoing) {
  HOGWILD_ENFORCE_EQ(outgoing.size(), size_);
  std::vector<std::vector<std::byte>> incoming(size_);
  collective("exchange", [&] {
    const std::uint64_t length_slot = next_slot(), bytes_slot = next_slot();
    if (size_ == 1) return;
    std::vector<std::uint64_t> lengths(size_);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends;
    for (unsigned r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      lengths[r] = outgoing[r].size();
      sends.push_back(context_->createUnboundBuffer(&lengths[r], sizeof(std::uint64_t)));
      sends.back()->send(static_cast<int>(r), length_slot);
      if (lengths[r] == 0) continue;
      // Gloo reads, never writes, a buffer it sends.
      sends.push_back(context_->createUnboundBuffer(const_cast<std::byte*>(outgoing[r].data()),
                                                    outgoing[r].size()));
      sends.back()->send(static_cast<int>(r), bytes_slot);
    }
    std::vector<int> unheard;
    for (unsigned r = 0; r < size_; ++r)
      if (r != rank_) unheard.push_back(static_cast<int>(r));
    while (!unheard.empty()) {
      std::uint64_t length = 0;
      auto head = context_->createUnboundBuffer(&length, sizeof length);
      head->recv(unheard, length_slot);
      int from = -1;
      if (!head->waitRecv(&from, timeout_)) throw CommError("the exchange was aborted");
      std::erase(unheard, from);
      auto& bytes = incoming[static_cast<unsigned>(from)];
      bytes.resize(length);
      if (length == 0) continue;
      auto body = context_->createUnboundBuffer(bytes.data(), bytes.size());
      body->recv(from, bytes_slot);
      if (!body->waitRecv(timeout_)) throw CommError("the exchange was aborted");
    }
    for (auto& send : sends)
      if (!send->waitSend(timeout_)) throw CommError("the exchange was aborted");
  });
  return incoming;
}

}  // namespace detail

std::unique_ptr<Communicator> make_gloo_communicator(const GlooOptions& options, unsigned rank,
                                                     unsigned size) {
  return std::make_unique<detail::GlooCommunicator>(options, rank, size);
}

bool gloo_built() noexcept { return true; }

bool gloo_run_id_used(const GlooOptions& options, unsigned size) {
  detail::KeyStore store = detail::open_store(options, options.timeout);
  for (unsigned r = 0; r < size; ++r)
    if (!store.has(detail::member_key(r))) return false;
  return true;
}

bool gloo_erase_run(const GlooOptions& options, unsigned rank, unsigned size) {
  try {
    detail::KeyStore store = detail::open_store(options, options.timeout);
    const auto member = store.find(detail::member_key(rank));
    if (!member || detail::member_lines(*member)[2] != options.owner)
      return true;  // not ours: another run's rank (or ours never joined)
    // What each rank wrote: its reports, Gloo's keys of connectFullMesh (its host
    // and its pairs' addresses), and its membership; ours last.
    for (unsigned k = 0; k < size; ++k) {
      const unsigned r = (rank + 1 + k) % size;
      const std::string keys[] = {detail::report_key("seen", r), detail::report_key("abort", r),
                                  "rank_" + std::to_string(r), std::to_string(r),
                                  detail::member_key(r)};
      for (const auto& key : keys)
        if (!store.erase(key)) return false;
      if (r == 0)
        for (const char* key : {detail::kNcclIdKey, detail::kNcclIdErrorKey})
          if (!store.erase(key)) return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace hogwild

// --- The nodes' join ---------------------------------------------------------

namespace hogwild {
namespace {

// A join key's value: OWNER, MACHINE, HOSTNAME, ADDRESSES, STATE (ready or failed),
// one a line, then the text (or the failure's message) to the end.
struct JoinValue {
  std::string owner, machine, hostname, addresses, state, text;
};

std::string join_key(unsigned node) { return fmt::format("hogwild/node/{}", node); }
// Set by a node refused a --node-rank that a live node holds, for that node to stop too.
std::string clash_key(unsigned node) { return fmt::format("hogwild/clash/{}", node); }

std::vector<char> encode(const JoinValue& v) {
  return detail::bytes(fmt::format("{}\n{}\n{}\n{}\n{}\n{}", v.owner, v.machine, v.hostname,
                                   v.addresses, v.state, v.text));
}

JoinValue decode(const std::string& s) {
  JoinValue v;
  std::string* fields[] = {&v.owner, &v.machine, &v.hostname, &v.addresses, &v.state};
  std::size_t begin = 0;
  for (std::string* f : fields) {
    const auto end = std::min(s.find('\n', begin), s.size());
    *f = s.substr(begin, end - begin);
    begin = std::min(end + 1, s.size());
  }
  v.text = s.substr(begin);
  return v;
}

// The pid of an owner "PID.START".
pid_t owner_pid(const std::string& owner) {
  pid_t pid = 0;
  std::from_chars(owner.data(), owner.data() + owner.size(), pid);
  return pid;
}

// The first line of `a` and `b` that differs, as "name=a" and "name=b".
std::pair<std::string, std::string> first_difference(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const auto ea = std::min(a.find('\n', i), a.size()), eb = std::min(b.find('\n', j), b.size());
    std::string la = a.substr(i, ea - i), lb = b.substr(j, eb - j);
    if (la != lb) return {la.empty() ? "(nothing)" : la, lb.empty() ? "(nothing)" : lb};
    i = ea + 1;
    j = eb + 1;
  }
  return {};
}

std::string own_hostname() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

std::vector<JoinedNode> gloo_join_nodes(const GlooOptions& options, unsigned node, unsigned nodes,
                                        const std::string& text,
                                        const std::atomic<std::int32_t>* stop) {
  // Each store command waits at most 10 s; the join's wait is the loop's below.
  detail::KeyStore store =
      detail::open_store(options, std::min(options.timeout, std::chrono::milliseconds(10000)));
  const JoinValue mine{options.owner,
                       detail::machine_identity(),
                       own_hostname(),
                       detail::format_addresses(detail::local_interfaces()),
                       "ready",
                       text};
  const std::string key = join_key(node);
  try {
    // A killed run's clash report goes before the claim: once the key is ours, a node
    // refused it reports the clash, and erasing it then would leave this node waiting.
    store.erase(clash_key(node));
    if (!store.claim(key, encode(mine))) {
      // Taken: by a run of this node that was killed (on this machine, its process
      // gone), which this one replaces, or by a live node.
      const auto found = store.find(key);
      const JoinValue other = decode(found.value_or(""));
      const pid_t pid = owner_pid(other.owner);
      const bool dead = other.machine == mine.machine && pid > 0 && ::kill(pid, 0) != 0 &&
                        errno == ESRCH;
      bool taken = true;
      if (!found || dead) {  // gone meanwhile, or a killed run's: take it
        if (found) store.erase(key);
        taken = !store.claim(key, encode(mine));
      }
      if (taken) {
        // Both stop: the holder hears of it through the clash key.
        store.set(clash_key(node), detail::bytes(fmt::format("host {}, pid {}", mine.hostname,
                                                             owner_pid(mine.owner))));
        throw ConfigError(fmt::format(
            "--node-rank {}: node {} of run '{}' is taken by a running node (host {}, pid {}): "
            "two nodes were given the same --node-rank (give each node its own), or that run "
            "is still going", node, node, options.run_id, other.hostname, pid));
      }
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(fmt::format("node {}: joining run '{}' through '{}' failed: {}", node,
                                options.run_id, options.rendezvous,
                                detail::without_location(e.what())));
  }
  std::vector<std::optional<JoinValue>> seen(nodes);
  seen[node] = mine;
  const auto deadline = detail::Clock::now() + options.timeout;
  for (;;) {
    if (stop && stop->load(std::memory_order_relaxed)) return {};
    if (const auto clash = store.find(clash_key(node)))
      throw ConfigError(fmt::format(
          "--node-rank {}: another node ({}) was started with --node-rank {} too: two nodes were "
          "given the same --node-rank; give each node its own", node, *clash, node));
    std::size_t missing = 0;
    for (unsigned r = 0; r < nodes; ++r) {
      if (seen[r]) continue;
      const auto found = store.find(join_key(r));
      if (!found) {
        ++missing;
        continue;
      }
      JoinValue v = decode(*found);
      if (v.state == "failed")
        throw ConfigError(fmt::format("node {} (host {}) failed: {}", r, v.hostname, v.text));
      if (v.text != text) {
        const auto [theirs, ours] = first_difference(v.text, text);
        const std::string why = fmt::format(
            "node {} (host {}) was started with {}, node {} (host {}) with {}: start every node "
            "with the same options and data, and its own --node-rank",
            r, v.hostname, theirs, node, mine.hostname, ours);
        gloo_join_failed(options, node, why);
        throw ConfigError(why);
      }
      seen[r] = std::move(v);
    }
    if (missing == 0) break;
    if (detail::Clock::now() >= deadline) {
      std::vector<unsigned> absent;
      for (unsigned r = 0; r < nodes; ++r)
        if (!seen[r]) absent.push_back(r);
      throw CommError(fmt::format(
          "node(s) {} did not join run '{}' through '{}' within {} s (--join-timeout)",
          fmt::join(absent, ", "), options.run_id, options.rendezvous,
          std::chrono::duration_cast<std::chrono::seconds>(options.timeout).count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<JoinedNode> out;
  for (auto& v : seen) out.push_back({v->hostname, v->machine, v->addresses});
  return out;
}

void gloo_join_failed(const GlooOptions& options, unsigned node, const std::string& why) noexcept {
  try {
    detail::KeyStore store = detail::open_store(options, std::chrono::milliseconds(3000));
    const auto found = store.find(join_key(node));
    // Another live node's key stays as it is (this one never held it).
    if (found && decode(*found).owner != options.owner) return;
    store.set(join_key(node), encode({options.owner, detail::machine_identity(), own_hostname(),
                                      "", "failed", why}));
  } catch (...) {
  }
}

void gloo_leave_join(const GlooOptions& options, unsigned node, unsigned nodes) noexcept {
  try {
    detail::KeyStore store = detail::open_store(options, std::chrono::milliseconds(3000));
    const auto found = store.find(join_key(node));
    if (!found || decode(*found).owner != options.owner) return;  // not ours
    // Every node's keys (a killed node's too), ours last: the join is over for all.
    for (unsigned k = 1; k <= nodes; ++k) {
      const unsigned r = (node + k) % nodes;
      store.erase(clash_key(r));
      store.erase(join_key(r));
    }
  } catch (...) {
  }
}

}  // namespace hogwild
