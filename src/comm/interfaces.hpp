// Which network interface a node's workers talk to the other nodes over, when the
// user names none (--iface): the one whose network holds an address of every other
// machine. Nodes on one machine talk over loopback; nodes on machines that share no
// network fail clearly, before any worker starts. (Not the hostname: two cloned
// machines share one, and Debian maps it to 127.0.1.1.)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hogwild::detail {

// An IPv4 address of an interface that is up, with its prefix length.
struct InterfaceAddress {
  std::string iface;
  std::uint32_t address = 0;  // host order
  unsigned prefix = 0;
  bool operator==(const InterfaceAddress&) const = default;
};

// This machine's interfaces that are up and carry an IPv4 address, loopback left out.
std::vector<InterfaceAddress> local_interfaces();

// The first IPv4 address of `iface`, dotted ("10.0.0.1"); 127.0.0.1 for loopback ("" or
// "lo"); "" where it has none.
std::string interface_address(const std::string& iface);

// What tells two machines apart: the kernel's boot id and the network namespace.
// Equal for processes that share loopback.
std::string machine_identity();

// "eth0 10.0.0.1/24" per address, ';'-separated, and back (bad items are skipped).
std::string format_addresses(const std::vector<InterfaceAddress>& addresses);
std::vector<InterfaceAddress> parse_addresses(const std::string& text);

// The first of `mine` whose network (address and prefix) holds an address of each of
// `peers` (one list per other machine); "" when none does.
std::string interface_toward(const std::vector<InterfaceAddress>& mine,
                             const std::vector<std::vector<InterfaceAddress>>& peers);

}  // namespace hogwild::detail
