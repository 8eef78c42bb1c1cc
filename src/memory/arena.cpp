#include "hogwild/arena.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <mutex>

#include "hogwild/error.hpp"

namespace hogwild {

namespace bip = boost::interprocess;

namespace {

constexpr char kMagic[8] = {'H', 'W', 'A', 'R', 'E', 'N', 'A', '1'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kNameLen = 48;

struct Entry {
  char name[kNameLen];
  std::uint64_t offset;
  std::uint64_t bytes;
};

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t blocks;
  std::uint32_t uid;
  std::int32_t creator_pid;
  std::uint64_t size;
  Entry entry[Arena::kMaxBlocks];
};

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// A transparent huge page of shared memory.
constexpr std::size_t kHugePage = std::size_t{2} << 20;

// kB of this process's mapping that starts at `base` mapped through 2 MiB pages
// (smaps' ShmemPmdMapped): what the kernel gave, whatever was asked.
std::size_t pmd_mapped_kb(const void* base) {
  std::ifstream smaps("/proc/self/smaps");
  char head[32];
  std::snprintf(head, sizeof head, "%lx-", reinterpret_cast<unsigned long>(base));
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.rfind(head, 0) == 0) {
      inside = true;
    } else if (inside && line.rfind("ShmemPmdMapped:", 0) == 0) {
      return std::strtoull(line.c_str() + 15, nullptr, 10);
    }
  }
  return 0;
}

// A 2 MiB-aligned address where `size` bytes can be mapped (MAP_FIXED), or null.
// Shared memory is mapped through 2 MiB pages only where the address is aligned as
// the file offset is (smaps' THPeligible stays 0 otherwise): a mapping at the
// kernel's 4 KiB-aligned choice got none, MADV_HUGEPAGE or not. The area is
// reserved PROT_NONE with 2 MiB to spare, and the spare is given back.
void* huge_aligned_address(std::size_t size) {
  void* area = mmap(nullptr, size + kHugePage, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (area == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(area);
  const std::uintptr_t aligned = align_up(start, kHugePage);
  if (aligned > start) munmap(area, aligned - start);
  const std::uintptr_t end = start + size + kHugePage;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  return reinterpret_cast<void*>(aligned);  // still reserved: MAP_FIXED replaces it
}

// A close-on-exec duplicate of fd, closed with the last copy of the pointer.
std::shared_ptr<int> keep_fd(int fd) {
  const int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) throw ResourceError(fmt::format("cannot keep the arena's descriptor: {}", std::strerror(errno)));
  return std::shared_ptr<int>(new int(d), [](int* p) {
    ::close(*p);
    delete p;
  });
}

// The segment kept for the next create() with ArenaOptions::reuse (arena.hpp).
// The globals are pointers, never destroyed (an Arena may outlive statics), and a
// forked child gets fresh ones (its parent's lock may have been held at the fork;
// its copy of the segment stays mapped, unused, until it exits).
constexpr std::size_t kMaxSpare = std::size_t{64} << 20;
struct Spare {
  pid_t pid = 0;
  std::size_t size = 0;
  std::shared_ptr<bip::mapped_region> region;
  std::shared_ptr<int> fd;
  std::string name;
};
std::mutex* g_spare_mutex = new std::mutex;
Spare* g_spare = new Spare;
const int g_spare_atfork = pthread_atfork(nullptr, nullptr, [] {
  g_spare_mutex = new std::mutex;
  g_spare = new Spare;
});

// The spare if it has `size` bytes (0: none wanted), zeroed; a spare of another
// size is freed (one run's arena is held at a time, not two).
Spare take_spare(std::size_t size) {
  Spare taken;
  {
    std::lock_guard g(*g_spare_mutex);
    std::swap(taken, *g_spare);
  }
  if (!taken.region || taken.pid != getpid() || taken.size != size || size == 0) return {};
  std::memset(taken.region->get_address(), 0, size);
  return taken;
}

// The last reference to an arena created with `reuse` ends: its segment becomes the
// spare, where there is none.
struct Recycle {
  Spare segment;
  std::shared_ptr<bool> keep;
  void operator()(void*) noexcept {
    if (segment.pid != getpid() || !*keep) return;
    std::lock_guard g(*g_spare_mutex);
    if (!g_spare->region) *g_spare = std::move(segment);
  }
};

}  // namespace

void release_spare_arena(std::size_t unless_bytes) {
  Spare freed;
  std::lock_guard g(*g_spare_mutex);
  if (unless_bytes == 0 || g_spare->size != unless_bytes || g_spare->pid != getpid())
    std::swap(freed, *g_spare);
}  // (unmapped as `freed` goes, after the lock: declared before it)

namespace {

std::string mib(std::size_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string unique_name() {
  std::uint64_t r = 0;
  if (getrandom(&r, sizeof r, 0) != sizeof r) throw Error("getrandom failed");
  return fmt::format("hogwild-{}-{}-{:016x}", getuid(), getpid(), r);
}

// Free bytes in the filesystem holding `dir`, or SIZE_MAX if unknown.
std::size_t free_bytes(const std::string& dir) {
  struct statvfs s {};
  if (statvfs(dir.c_str(), &s) != 0) return SIZE_MAX;
  return static_cast<std::size_t>(s.f_bavail) * s.f_frsize;
}

// "N MiB but DIR has only M MiB free", in bytes too where the two round alike.
std::string need_and_free(std::size_t bytes, const std::string& where, std::size_t avail) {
  std::string need = mib(bytes), have = mib(avail);
  if (need == have) {
    need += fmt::format(" ({} bytes)", bytes);
    have += fmt::format(" ({} bytes)", avail);
  }
  struct statvfs s {};
  if (avail == 0 && statvfs(where.c_str(), &s) == 0 && s.f_blocks == 0)  // /proc, /sys
    return fmt::format("{} but {} holds no files (a file system of no size)", need, where);
  return fmt::format("{} but {} has only {} free", need, where, have);
}

ResourceError no_space(std::size_t bytes, const std::string& where) {
  return ResourceError(fmt::format(
      "the parameter arena needs {}; free some space, enlarge it "
      "(mount -o remount,size=... /dev/shm) or put the arena on disk with --shm-dir DIR",
      need_and_free(bytes, where, free_bytes(where))));
}

// Reserves the pages now: on tmpfs an over-committed segment would otherwise
// SIGBUS on first touch, long after start-up.
void reserve(int fd, std::size_t bytes, const std::string& where) {
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc == ENOSPC || rc == EFBIG) throw no_space(bytes, where);
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL)
    throw ResourceError(fmt::format("cannot reserve {} in {}: {}", mib(bytes), where,
                                    std::strerror(rc)));
}

void check_space(std::size_t bytes, const std::string& where) {
  std::size_t avail = free_bytes(where);
  if (avail != SIZE_MAX && avail < bytes)
    throw ResourceError(fmt::format(
        "the parameter arena needs {}; free some space, enlarge it "
        "or use --shm-dir DIR to put the arena in a file-backed mapping",
        need_and_free(bytes, where, avail)));
}

// Page size of `dir` when it is a hugetlbfs mount, else 0.
std::size_t hugetlbfs_page(const std::string& dir) {
  struct statfs s {};
  if (dir.empty() || statfs(dir.c_str(), &s) != 0 || s.f_type != HUGETLBFS_MAGIC) return 0;
  return static_cast<std::size_t>(s.f_bsize);
}

// The bracketed word of /sys/kernel/mm/transparent_hugepage/shmem_enabled.
std::string shmem_thp_setting() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string line;
  std::getline(f, line);
  const auto a = line.find('['), b = line.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : line.substr(a + 1, b - a - 1);
}

// The huge= option of the tmpfs mount that holds `dir` ("never" when absent), from
// /proc/mounts: the longest mount point that is a prefix of dir.
std::string tmpfs_huge_option(const std::string& dir) {
  std::ifstream mounts("/proc/mounts");
  std::string device, point, type, options, best_point, best = "never";
  std::string rest;
  while (mounts >> device >> point >> type >> options && std::getline(mounts, rest)) {
    const bool under = dir == point || dir.rfind(point.back() == '/' ? point : point + "/", 0) == 0;
    if (!under || point.size() < best_point.size()) continue;
    best_point = point;
    best = "never";
    if (type != "tmpfs") continue;
    for (std::size_t at = 0; at < options.size();) {
      const std::size_t end = std::min(options.find(',', at), options.size());
      if (options.compare(at, 5, "huge=") == 0) best = options.substr(at + 5, end - at - 5);
      at = end + 1;
    }
  }
  return best;
}

}  // namespace

HugePagesStatus huge_pages_status(const ArenaOptions& options) {
  if (!options.huge_pages) return {false, "huge pages not requested"};
  if (const std::size_t page = hugetlbfs_page(options.dir))
    return {true, fmt::format("arena on hugetlbfs {} ({} KiB pages)", options.dir, page >> 10)};
  if (!options.dir.empty())
    return {false, fmt::format("{} is not a hugetlbfs mount: the arena uses normal pages "
                               "(mount -t hugetlbfs none DIR and reserve pages with "
                               "/proc/sys/vm/nr_hugepages)", options.dir)};
  // /dev/shm is a tmpfs mount: its own huge= option decides (shmem_enabled governs
  // the kernel's internal mount), unless shmem_enabled forces or denies for all.
  // Checked here by smaps (tests/test_placement.cpp): shmem_enabled "advise" alone
  // gave the arena no 2 MiB page; "force", or /dev/shm mounted huge=advise with
  // MADV_HUGEPAGE, did.
  const std::string thp = shmem_thp_setting();
  if (thp == "deny")
    return {false, "transparent huge pages are denied for all shared memory "
                   "(/sys/kernel/mm/transparent_hugepage/shmem_enabled is \"deny\"): the "
                   "arena uses 4 KiB pages"};
  if (thp == "force")
    return {true, "arena in /dev/shm on 2 MiB pages (shmem_enabled is \"force\")"};
  const std::string mount = tmpfs_huge_option("/dev/shm");
  if (mount == "always" || mount == "within_size" || mount == "advise")
    return {true, "arena in /dev/shm with MADV_HUGEPAGE (/dev/shm mounted huge=" + mount + ")"};
  return {false, fmt::format("transparent huge pages are off for /dev/shm (mounted huge={}): "
                             "the arena uses 4 KiB pages; remount it with huge=advise "
                             "(mount -o remount,huge=advise /dev/shm) or use --shm-dir on a "
                             "hugetlbfs mount", mount)};
}

std::size_t Arena::required_bytes(const std::vector<BlockSpec>& blocks) {
  std::size_t size = align_up(sizeof(Header), 4096);
  for (auto& b : blocks) size = align_up(size + b.bytes, kAlignment);
  return std::max<std::size_t>(size, 4096);
}

Arena Arena::create(const std::vector<BlockSpec>& blocks, const ArenaOptions& options) {
  if (blocks.size() > kMaxBlocks)
    throw ConfigError(fmt::format("the arena holds at most {} blocks, {} requested", kMaxBlocks,
                                  blocks.size()));
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].name.empty() || blocks[i].name.size() >= kNameLen)
      throw ConfigError(fmt::format("arena block name \"{}\" must have 1..{} characters",
                                    blocks[i].name, kNameLen - 1));
    for (std::size_t j = 0; j < i; ++j)
      if (blocks[i].name == blocks[j].name)
        throw ConfigError("arena block \"" + blocks[i].name + "\" declared twice");
  }
  std::size_t size = required_bytes(blocks);
  const HugePagesStatus huge = huge_pages_status(options);
  if (huge.ok) {
    const std::size_t page = hugetlbfs_page(options.dir);
    size = align_up(size, page ? page : kHugePage);
  }

  Arena a;
  bool advised = false;  // /dev/shm: MADV_HUGEPAGE accepted on the aligned mapping
  a.size_ = size;
  const bool recyclable = options.reuse && options.dir.empty() && !huge.ok && size <= kMaxSpare;
  Spare reused = take_spare(recyclable ? size : 0);  // another size's is freed first
  std::shared_ptr<bip::mapped_region> region = reused.region;
  a.fd_ = reused.fd;
  a.name_ = reused.region ? reused.name : unique_name();
  try {
    if (region) {
      // the spare: its pages reserved, and every one mapped here by take_spare's memset
      a.mapped_ = true;
    } else if (options.dir.empty()) {
      check_space(size, "/dev/shm");
      bip::permissions perm(0600);
      bip::shared_memory_object shm(bip::create_only, a.name_.c_str(), bip::read_write, perm);
      // From here on the name exists: remove it on every path out of this block.
      struct Unlink {
        const char* n;
        ~Unlink() { bip::shared_memory_object::remove(n); }
      } unlink_guard{a.name_.c_str()};
      shm.truncate(static_cast<bip::offset_t>(size));
      const int fd = shm.get_mapping_handle().handle;
      a.fd_ = keep_fd(fd);
      if (void* at = huge.ok ? huge_aligned_address(size) : nullptr) {
        // The pages must be allocated through the advised mapping: posix_fallocate
        // before it allocated 4 KiB pages that no advice merges later (smaps: none on
        // 2 MiB pages under huge=advise). MADV_POPULATE_WRITE faults them in and, where
        // an access would raise SIGBUS (a full /dev/shm), fails instead.
        region = std::make_shared<bip::mapped_region>(shm, bip::read_write, 0, size, at, MAP_FIXED);
        advised = madvise(region->get_address(), size, MADV_HUGEPAGE) == 0;
        if (!advised || madvise(region->get_address(), size, MADV_POPULATE_WRITE) != 0) {
          if (advised && errno != EINVAL) throw no_space(size, "/dev/shm");
          reserve(fd, size, "/dev/shm");  // a kernel before 5.14: no SIGBUS, small pages
        }
        a.mapped_ = true;
      } else {
        reserve(fd, size, "/dev/shm");
        region = std::make_shared<bip::mapped_region>(shm, bip::read_write);
        // Mapped whole in its creator (a run's parent), whose page tables then name
        // every page the arena holds: a run's memory, summed over its processes'
        // shares of the pages they map, counts the pages no process has touched yet
        // (a sparse model's untrained weights, unused snapshots) as the allocation
        // they are. (Linux before 5.14 ignores the advice: they are left out.)
        if (options.map_now) (void)madvise(region->get_address(), size, MADV_POPULATE_WRITE);
        a.mapped_ = options.map_now;
      }
    } else {
      a.file_backed_ = true;
      std::error_code ec;
      if (!std::filesystem::is_directory(options.dir, ec))
        throw ConfigError("--shm-dir " + options.dir + " is not a directory");
      check_space(size, options.dir);
      std::string path = (std::filesystem::path(options.dir) / a.name_).string();
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0)
        throw IoError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
      struct Remove {
        const std::string& p;
        int fd;
        ~Remove() {
          ::close(fd);
          ::unlink(p.c_str());
        }
      } remove_guard{path, fd};
      if (ftruncate(fd, static_cast<off_t>(size)) != 0)
        throw ResourceError(fmt::format("cannot size {}: {}", path, std::strerror(errno)));
      a.fd_ = keep_fd(fd);
      reserve(fd, size, options.dir);
      bip::file_mapping file(path.c_str(), bip::read_write);
      region = std::make_shared<bip::mapped_region>(file, bip::read_write);
    }
  } catch (const bip::interprocess_exception& e) {
    throw ResourceError(fmt::format("cannot create the shared-memory arena ({}): {}",
                                    mib(size), e.what()));
  }

  a.base_ = static_cast<std::byte*>(region->get_address());
  // The mapping lives as long as the Arena (and across fork); then it is the spare.
  if (recyclable) {
    a.keep_ = std::make_shared<bool>(true);
    a.region_ = std::shared_ptr<void>(region.get(),
                                      Recycle{{getpid(), size, region, a.fd_, a.name_}, a.keep_});
  } else
    a.region_ = region;
  // hugetlbfs needs no advice; /dev/shm took it above, before any page existed, and
  // the answer is what smaps says the kernel did: on kernel 6.18, /dev/shm mounted
  // huge=advise with MADV_HUGEPAGE got no 2 MiB page (huge=always and
  // shmem_enabled=force did), so asking is not the same as getting.
  a.huge_pages_ = huge.ok && (hugetlbfs_page(options.dir) != 0 ||
                              (advised && pmd_mapped_kb(a.base_) > 0));

  auto* h = reinterpret_cast<Header*>(a.base_);
  std::memcpy(h->magic, kMagic, sizeof kMagic);
  h->version = kVersion;
  h->blocks = static_cast<std::uint32_t>(blocks.size());
  h->uid = getuid();
  h->creator_pid = getpid();
  h->size = size;
  std::size_t offset = align_up(sizeof(Header), 4096);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    std::strncpy(h->entry[i].name, blocks[i].name.c_str(), kNameLen - 1);
    h->entry[i].offset = offset;
    h->entry[i].bytes = blocks[i].bytes;
    offset = align_up(offset + blocks[i].bytes, kAlignment);
  }
  return a;
}

void Arena::map_all() {
  if (base_ && !file_backed_ && !mapped_) (void)madvise(base_, size_, MADV_POPULATE_WRITE);
  mapped_ = true;
}

namespace {
// [at, at + bytes) lies inside [base, base + size) (compared as addresses: a
// pointer past the mapping is not one to compare).
bool inside(const std::byte* base, std::size_t size, const std::byte* at, std::size_t bytes) noexcept {
  const auto b = reinterpret_cast<std::uintptr_t>(base), a = reinterpret_cast<std::uintptr_t>(at);
  return base && a >= b && bytes <= size && a - b <= size - bytes;
}
}  // namespace

bool Arena::map_private(std::byte* at, std::size_t bytes) noexcept {
  if (keep_) *keep_ = false;  // (a failed MAP_FIXED may have unmapped the range)
  if (!inside(base_, size_, at, bytes)) {
    errno = EINVAL;
    return false;
  }
  return ::mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                0) != MAP_FAILED;
}

void Arena::map_shared_again(std::byte* at, std::size_t bytes) noexcept {
  if (inside(base_, size_, at, bytes) && fd_ &&
      ::mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, *fd_, at - base_) != MAP_FAILED) {
    if (keep_) *keep_ = true;
    return;
  }
  if (keep_) *keep_ = false;
}

Arena Arena::attach(int fd) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0)
    throw Error(fmt::format("cannot attach the arena: descriptor {} is not open", fd));
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < sizeof(Header) || st.st_uid != getuid())
    throw Error(fmt::format("cannot attach the arena: descriptor {} holds no arena of this user", fd));
  void* at = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (at == MAP_FAILED)
    throw ResourceError(fmt::format("cannot map the arena ({}): {}", mib(size), std::strerror(errno)));
  std::shared_ptr<void> region(at, [size](void* p) { ::munmap(p, size); });
  const auto* h = static_cast<const Header*>(at);
  if (std::memcmp(h->magic, kMagic, sizeof kMagic) != 0 || h->version != kVersion ||
      h->size != size || h->blocks > kMaxBlocks)
    throw Error(fmt::format("cannot attach the arena: descriptor {} holds no arena of version {}",
                            fd, kVersion));
  Arena a;
  a.region_ = std::move(region);
  a.fd_ = keep_fd(fd);
  a.base_ = static_cast<std::byte*>(at);
  a.size_ = size;
  a.name_ = "(attached)";  // huge_pages(): false, nothing was asked for here
  return a;
}

bool Arena::has(const std::string& name) const {
  if (!base_) return false;
  auto* h = reinterpret_cast<const Header*>(base_);
  for (std::uint32_t i = 0; i < h->blocks; ++i)
    if (name == h->entry[i].name) return true;
  return false;
}

std::vector<std::string> Arena::names() const {
  std::vector<std::string> out;
  if (!base_) return out;
  auto* h = reinterpret_cast<const Header*>(base_);
  for (std::uint32_t i = 0; i < h->blocks; ++i) out.emplace_back(h->entry[i].name);
  return out;
}

std::span<std::byte> Arena::block(const std::string& name) const {
  HOGWILD_ENFORCE(base_ != nullptr, "arena is not mapped");
  auto* h = reinterpret_cast<const Header*>(base_);
  for (std::uint32_t i = 0; i < h->blocks; ++i)
    if (name == h->entry[i].name) return {base_ + h->entry[i].offset, h->entry[i].bytes};
  throw Error("arena has no block named \"" + name + "\"");
}

namespace {
constexpr const char* kRendezvousPrefix = "hogwild-gloo-";
}  // namespace

std::pair<std::string, int> make_rendezvous_dir() {
  std::string dir = (std::filesystem::temp_directory_path() /
                     (std::string(kRendezvousPrefix) + "XXXXXX")).string();
  if (!::mkdtemp(dir.data()))
    throw ResourceError(fmt::format("cannot make the Gloo rendezvous directory {}: {}", dir,
                                    std::strerror(errno)));
  // Locked under another name, then renamed: a cleanup finds `owner` only locked.
  const std::string locking = dir + "/owner.new", owner = dir + "/owner";
  const int fd = ::open(locking.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0 || ::rename(locking.c_str(), owner.c_str()) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    throw ResourceError(fmt::format("cannot lock the Gloo rendezvous directory {}: {}", dir,
                                    std::strerror(err)));
  }
  return {dir, fd};
}

std::vector<std::string> cleanup_stale_rendezvous() {
  std::vector<std::string> removed;
  std::error_code ec;
  const auto tmp = std::filesystem::temp_directory_path(ec);
  if (ec) return removed;
  for (auto& e : std::filesystem::directory_iterator(tmp, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(kRendezvousPrefix)) continue;
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || st.st_uid != getuid() || !S_ISDIR(st.st_mode))
      continue;
    const int fd = ::open((e.path() / "owner").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;  // none yet (a run making it), or not ours to judge
    const bool gone = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (gone) {
      std::error_code rc;
      std::filesystem::remove_all(e.path(), rc);
      if (!rc) removed.push_back(e.path().string());
    }
    ::close(fd);
  }
  return removed;
}

std::vector<std::string> cleanup_stale_segments() {
  std::vector<std::string> removed;
  const std::string prefix = fmt::format("hogwild-{}-", getuid());
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || st.st_uid != getuid() || !S_ISREG(st.st_mode))
      continue;
    // hogwild-<uid>-<pid>-<random>: only segments whose creator is gone.
    auto rest = name.substr(prefix.size());
    auto dash = rest.find('-');
    if (dash == std::string::npos) continue;
    pid_t pid = 0;
    try {
      pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
    } catch (...) {
      continue;
    }
    if (pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH)) continue;
    if (bip::shared_memory_object::remove(name.c_str())) removed.push_back(name);
  }
  return removed;
}

}  // namespace hogwild
