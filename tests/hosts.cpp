#include "hosts.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>

namespace hogwild::test {
namespace {

// Runs `command` through sh, its output to /dev/null; its exit status.
int sh(const std::string& command) {
  const int rc = std::system((command + " >/dev/null 2>&1").c_str());
  return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

}  // namespace

std::unique_ptr<Hosts> Hosts::make(const std::vector<std::string>& names, std::string* why) {
  if (names.size() != 2) {
    *why = "Hosts: two hosts only (one veth pair)";
    return nullptr;
  }
  if (::geteuid() != 0) {
    *why = "network namespaces need root";
    return nullptr;
  }
  if (sh("command -v ip") != 0) {
    *why = "iproute2's ip is not installed (scripts/install-deps.sh)";
    return nullptr;
  }
  std::unique_ptr<Hosts> h(new Hosts);
  h->names_ = names;
  const pid_t me = ::getpid();
  h->subnet_ = static_cast<unsigned>(me) % 250 + 1;
  for (std::size_t k = 0; k < names.size(); ++k)
    h->netns_.push_back(fmt::format("hwtest-{}-{}", me, k));
  for (const auto& ns : h->netns_)
    if (sh("ip netns add " + ns) != 0) {
      *why = "cannot make a network namespace (`ip netns add` failed: no CAP_SYS_ADMIN?)";
      return nullptr;  // the destructor removes those made
    }
  const std::string a = fmt::format("hwv{}a", me), b = fmt::format("hwv{}b", me);
  bool ok = sh(fmt::format("ip link add {} type veth peer name {}", a, b)) == 0 &&
            sh(fmt::format("ip link set {} netns {}", a, h->netns_[0])) == 0 &&
            sh(fmt::format("ip link set {} netns {}", b, h->netns_[1])) == 0 &&
            sh(fmt::format("ip -n {} link set {} name {}", h->netns_[0], a, h->iface(0))) == 0 &&
            sh(fmt::format("ip -n {} link set {} name {}", h->netns_[1], b, h->iface(1))) == 0;
  for (std::size_t k = 0; ok && k < 2; ++k) {
    const std::string in = "ip -n " + h->netns_[k];
    ok = sh(in + " link set lo up") == 0 &&
         sh(fmt::format("{} address add {}/24 dev {}", in, h->address(k), h->iface(k))) == 0 &&
         sh(fmt::format("{} link set {} up", in, h->iface(k))) == 0;
  }
  if (!ok) {
    sh(fmt::format("ip link del {}", a));
    *why = "cannot join two network namespaces with a veth pair (no veth support?)";
    return nullptr;
  }
  return h;
}

Hosts::~Hosts() {
  for (const auto& ns : netns_) sh("ip netns del " + ns);  // the veth pair goes with them
}

// eth0 on each, as on two real machines.
std::string Hosts::iface(std::size_t) const { return "eth0"; }

std::string Hosts::address(std::size_t k) const {
  return fmt::format("10.77.{}.{}", subnet_, k + 1);
}

Background Hosts::start(std::size_t k, std::vector<std::string> argv, const TempDir& dir,
                        const std::string& out_name) const {
  Background b{0, dir.file(out_name)};
  std::vector<char*> args;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  const std::string ns_path = "/run/netns/" + netns_[k];
  const std::string& host = names_[k];
  b.pid = ::fork();
  if (b.pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const int fd = ::open(b.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const int ns = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0 || ::unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("hwtest-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0 ||
        ::sethostname(host.data(), host.size()) != 0) {
      ::perror("Hosts::start: entering the host's namespaces");
      ::_exit(126);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return b;
}

void Hosts::set_link(std::size_t k, bool up) const {
  sh(fmt::format("ip -n {} link set {} {}", netns_[k], iface(k), up ? "up" : "down"));
}

}  // namespace hogwild::test
