// The Gloo Communicator: ranks on any machines that reach each other over TCP meet
// through a rendezvous store (a directory every node shares, or a redis server),
// then talk over a full mesh of Gloo TCP pairs. Each rank sums its slice (slice_of)
// of every rank's data in rank order, as the shared-memory backend does, and sends
// it to the others: every rank gets the same bits, and the same as from shm.
// (Gloo's own ring all-reduce also gives every rank the same bits, but sums each
// segment in a ring order of its own; it is no faster here.)
//
// A failed collective (a dead peer, abort(), a timeout) breaks the communicator for
// good: the rank writes a report to the store, then closes its pairs, so that its
// peers fail at once too. An aborted rank's report names it and its reason; else
// the ranks that wrote no report within a second are named: gone, or stuck.
//
// Gloo starts a thread per communicator (its TCP device loop): make communicators
// in each rank after fork, never in a process that forks later. A communicator
// ignores SIGPIPE in its process (unless the program handles it): a write to a
// peer that is gone must fail, not kill the rank. Its keys (a few per rank) stay in
// the store until gloo_erase_run erases them: the program that started the ranks
// does, once they are done.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace hogwild {

struct GlooOptions {
  // "file:DIR": a directory every rank can write (shared by the nodes, e.g. over
  // NFS); "redis://HOST:PORT": a redis server every rank reaches.
  std::string rendezvous;
  // Prefixes every key: an earlier run's keys in the same store never poison a new
  // run. A run id can be used once per store (and tag).
  std::string run_id;
  // Network interface of the TCP pairs ("eth0"). Empty: loopback, which serves one
  // machine only; ranks on several machines need it (they detect its absence and
  // say so). Not the hostname: Debian maps it to 127.0.1.1.
  std::string iface;
  // A name for messages ("node 1"), may be empty.
  std::string node;
  // Bounds every wait: rendezvous, each step of a collective.
  std::chrono::milliseconds timeout{10000};
  // Communicators with distinct tags are independent: they can run collectives at
  // the same time (from two threads).
  std::string tag;
  // Who started the rank (a process and its start time, say): gloo_erase_run
  // erases a run's keys only for its owner.
  std::string owner;
};

// Rank `rank` of `size`: returns once every rank has joined (ConfigError for a bad
// rendezvous, run id, interface or rank; CommError when the others do not come
// within the timeout). Throws ConfigError when built without Gloo.
std::unique_ptr<Communicator> make_gloo_communicator(const GlooOptions& options, unsigned rank,
                                                     unsigned size);
// False when built without Gloo.
bool gloo_built() noexcept;
// True when all `size` ranks of run options.run_id (tag options.tag) joined it in
// the store: the id belongs to an earlier run (ConfigError for a bad rendezvous).
// Opens the store and closes it again; starts no thread.
bool gloo_run_id_used(const GlooOptions& options, unsigned size);
// Erases the keys of run options.run_id (tag options.tag) from the store, every
// rank's, if its rank `rank` was started by options.owner (so not when a second
// node took a rank that was already taken). Call it once the run is over for
// `rank`; the others then need no key, unless they are still naming a failure (a
// second). Ranks that were killed leave their keys to this. False when the store
// could not be reached; never throws.
bool gloo_erase_run(const GlooOptions& options, unsigned rank, unsigned size);

// One node as it joined (gloo_join_nodes): what it said about itself.
struct JoinedNode {
  std::string hostname;
  std::string machine;    // machine_identity(): equal on one machine
  std::string addresses;  // format_addresses(local_interfaces())
};

// The nodes of a run meet, in each node's parent before it starts any worker: each
// publishes `text` (what every node must agree on: options, data) and who it is
// under options.run_id's join keys, then waits for every node's, up to
// options.timeout (--join-timeout: a node may start that much later than the first).
// Returns every node's JoinedNode (this one's included) once all have joined; an
// empty vector when *stop became non-zero while waiting. Throws ConfigError (exit 2)
// at once when a node's text differs (naming the first line that does), when a node
// said it failed (gloo_join_failed: its message), or when a live node holds this
// --node-rank; CommError when nodes are still missing at the timeout, naming them.
// A key left by a killed run of this node, on this machine, is taken over.
std::vector<JoinedNode> gloo_join_nodes(const GlooOptions& options, unsigned node, unsigned nodes,
                                        const std::string& text,
                                        const std::atomic<std::int32_t>* stop);
// This node failed (before, while or after joining): its join key says so, with
// `why`, for the nodes waiting to join it. Never throws.
void gloo_join_failed(const GlooOptions& options, unsigned node, const std::string& why) noexcept;
// Once the join is over for every node (the run ends, or this node failed a second
// ago): erases every node's join keys, if this node's is its owner's. Never throws.
void gloo_leave_join(const GlooOptions& options, unsigned node, unsigned nodes) noexcept;

namespace detail {

class KeyStore;

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const GlooOptions& options, unsigned rank, unsigned size);
  ~GlooCommunicator() override;

  unsigned rank() const noexcept override { return rank_; }
  unsigned size() const noexcept override { return size_; }
  std::string_view backend() const noexcept override { return "gloo"; }

  void all_reduce(std::span<float> data, Reduce op) override;
  void all_reduce(std::span<double> data, Reduce op) override;
  void reduce_scatter(std::span<float> data) override;
  void reduce_scatter(std::span<double> data) override;
  void all_gather(std::span<float> data) override;
  void all_gather(std::span<double> data) override;
  std::vector<IndexValue> all_gather(std::span<const IndexValue> mine) override;
  void broadcast(std::span<std::byte> data, unsigned root) override;
  void barrier() override;
  std::vector<std::vector<std::byte>> exchange(
      const std::vector<std::vector<std::byte>>& outgoing) override;
  void abort(std::string_view why) noexcept override;

 private:
  template <class T> void reduce(std::span<T> data, Reduce op);
  template <class T> void gather(std::span<T> data);
  // rank r's bytes parts[r] of data to every rank.
  void gather_parts(std::span<std::byte> data, const std::vector<Slice>& parts);
  // Runs a collective: throws at once when broken, translates Gloo's failures.
  template <class Fn> void collective(const char* name, Fn&& fn);
  [[noreturn]] void fail(const char* name, const std::string& what);
  // Where the failure began: the rank that aborted, else the ranks that do not
  // report it, else what this rank saw.
  // Sets unreachable_ where `what` is a timeout or a failed connection and the
  // ranks that did not answer are on other machines (PeerUnreachable).
  std::string origin(const std::string& what);
  // The ranks on another machine than this rank's (addresses that differ).
  std::vector<unsigned> remote_ranks() const;
  // "node 1 (host b, 10.0.0.2)": a rank's node, host and address.
  std::string locate(unsigned rank) const;
  std::string locate(const std::vector<unsigned>& ranks) const;  // each, ", "-separated
  [[noreturn]] void throw_broken(const char* name) const;
  void close_pairs() noexcept;
  // A message slot (Gloo's tag of a message stream) of its own for each of our
  // collectives.
  std::uint64_t next_slot();
  std::string describe(unsigned rank) const;  // "rank 2 (node b)"

  unsigned rank_, size_;
  std::vector<std::string> nodes_;  // each rank's node name
  std::vector<std::string> hosts_, addresses_;  // each rank's hostname and IPv4 address
  std::unique_ptr<KeyStore> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  std::mutex mutex_;   // broken_ and the store (abort() may come from another thread)
  std::string broken_;  // why the collectives throw, once one failed
  bool unreachable_ = false;  // ... because a peer on another machine did not answer
  std::uint64_t collectives_ = 0;  // of ours, so far
};

}  // namespace detail
}  // namespace hogwild
