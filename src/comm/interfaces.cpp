#include "comm/interfaces.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <charconv>
#include <fstream>

#include <fmt/format.h>

namespace hogwild::detail {

std::vector<InterfaceAddress> local_interfaces() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    const auto* m = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask);
    const std::uint32_t mask = m ? ntohl(m->sin_addr.s_addr) : 0xffffffffu;
    out.push_back({i->ifa_name, ntohl(a->sin_addr.s_addr),
                   static_cast<unsigned>(__builtin_popcount(mask))});
  }
  ::freeifaddrs(list);
  return out;
}

std::string machine_identity() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat ns {};
  const bool have_ns = ::stat("/proc/self/ns/net", &ns) == 0;
  return fmt::format("{}/{}", boot, have_ns ? ns.st_ino : 0);
}

std::string interface_address(const std::string& iface) {
  if (iface.empty() || iface == "lo") return "127.0.0.1";
  for (const auto& a : local_interfaces())
    if (a.iface == iface)
      return fmt::format("{}.{}.{}.{}", a.address >> 24, (a.address >> 16) & 255,
                         (a.address >> 8) & 255, a.address & 255);
  return "";
}

std::string format_addresses(const std::vector<InterfaceAddress>& addresses) {
  std::string s;
  for (const auto& a : addresses)
    s += fmt::format("{}{} {}.{}.{}.{}/{}", s.empty() ? "" : ";", a.iface, a.address >> 24,
                     (a.address >> 16) & 255, (a.address >> 8) & 255, a.address & 255, a.prefix);
  return s;
}

std::vector<InterfaceAddress> parse_addresses(const std::string& text) {
  std::vector<InterfaceAddress> out;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = std::min(text.find(';', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    begin = end + 1;
    const auto space = item.find(' '), slash = item.find('/');
    if (space == std::string::npos || slash == std::string::npos || slash < space) continue;
    in_addr a{};
    const std::string ip = item.substr(space + 1, slash - space - 1);
    unsigned prefix = 0;
    const char* first = item.data() + slash + 1;
    const char* last = item.data() + item.size();
    const auto [p, ec] = std::from_chars(first, last, prefix);
    if (::inet_pton(AF_INET, ip.c_str(), &a) != 1 || ec != std::errc() || p != last || prefix > 32)
      continue;
    out.push_back({item.substr(0, space), ntohl(a.s_addr), prefix});
  }
  return out;
}

std::string interface_toward(const std::vector<InterfaceAddress>& mine,
                             const std::vector<std::vector<InterfaceAddress>>& peers) {
  for (const auto& m : mine) {
    const std::uint32_t mask = m.prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - m.prefix);
    bool all = true;
    for (const auto& peer : peers) {
      bool reached = false;
      for (const auto& p : peer) reached |= (p.address & mask) == (m.address & mask);
      all = all && reached;
    }
    if (all) return m.iface;
  }
  return {};
}

}  // namespace hogwild::detail
