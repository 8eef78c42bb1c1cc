// Two machines on one: each "host" is a network namespace of its own, joined to the
// other by a veth pair (10.77.K.1 and 10.77.K.2 on /24, K from this process's pid),
// and every program started on it gets a mount namespace of its own with a private
// /dev/shm (a fresh tmpfs) and a UTS namespace with the host's hostname. What two
// hosts do not share, they do not share here: addresses, loopback, shared memory,
// hostname; what they may share (a folder on NFS: the file: rendezvous) is the file
// system, as here.
//
// Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2's `ip`: Hosts::make says
// why not where they are missing, and the test skips (exit 77).
#pragma once
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "support.hpp"

namespace hogwild::test {

class Hosts {
 public:
  // `names`: each host's hostname ("node0", "node1"; two hosts may share one, as
  // cloned machines do). nullptr, and `why` set, where namespaces cannot be made.
  static std::unique_ptr<Hosts> make(const std::vector<std::string>& names, std::string* why);
  ~Hosts();  // deletes the namespaces (their programs must be gone)
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  std::size_t size() const { return names_.size(); }
  // Host k's interface toward the others, as seen on it, and its address.
  std::string iface(std::size_t k) const;
  std::string address(std::size_t k) const;
  // Starts argv on host k (argv[0] a path), stdout and stderr to dir/out_name.
  Background start(std::size_t k, std::vector<std::string> argv, const TempDir& dir,
                   const std::string& out_name) const;
  // Takes host k's link down (a cut cable), or up again.
  void set_link(std::size_t k, bool up) const;

 private:
  Hosts() = default;
  std::vector<std::string> names_;    // hostnames
  std::vector<std::string> netns_;    // `ip netns` names
  unsigned subnet_ = 0;
};

}  // namespace hogwild::test
