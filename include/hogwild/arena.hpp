// The parameter arena: one shared-memory segment holding named, 128-byte aligned
// blocks (model tensors, optimiser state, the trainer's control block). The parent
// creates it before forking; workers inherit the mapping across fork.
//
// The segment is a Boost.Interprocess shared_memory_object (POSIX shm, mode 0600,
// an unguessable name "hogwild-<uid>-<pid>-<random>") or, with a directory, a file
// mapping. Its name is unlinked as soon as the parent has mapped it: every process
// that needs it inherits the mapping, so no exit path — a crash, SIGKILL of the
// parent, a failed worker — can leave an entry in /dev/shm behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hogwild {

struct BlockSpec {
  std::string name;     // at most 47 characters, unique in the arena
  std::size_t bytes;    // zero-filled at creation
};

struct ArenaOptions {
  // Empty: POSIX shared memory (/dev/shm). Otherwise a file-backed mapping in this
  // directory, for machines whose /dev/shm is too small.
  std::string dir;
  // Back the arena with 2 MiB pages where the system allows it (fewer TLB misses on
  // large models): on /dev/shm the arena is mapped at a 2 MiB-aligned address with
  // MADV_HUGEPAGE, honoured when /dev/shm is mounted huge=always, within_size or
  // advise, or when /sys/kernel/mm/transparent_hugepage/shmem_enabled is "force";
  // a `dir` on hugetlbfs is huge by construction (the size is rounded up to its
  // page size). Where neither holds the arena keeps 4 KiB pages and
  // Arena::huge_pages() is false; huge_pages_status() says why.
  bool huge_pages = false;
  // Map every page into the creator now (MADV_POPULATE_WRITE), so that its page
  // tables name all of them and a memory reading counts pages no process touched
  // yet; false leaves it to map_all(), later (a run's parent calls it once its
  // workers have started, while it waits: 1.7 ms for a 4 MB arena here). The pages
  // are reserved at creation either way.
  bool map_now = true;
  // Keep the segment, once the last copy of this Arena is gone, for this process's
  // next create() of the same size with `reuse` (one segment at a time, up to
  // 64 MiB, on /dev/shm with 4 KiB pages; nameless, so it goes with the process),
  // which zeroes and takes it instead of allocating, mapping and later freeing its
  // pages again (2-3 ms of a run with a 4 MB model). Only for an arena whose
  // memory nothing outside this process still maps once it is dropped (a run's,
  // whose workers have all ended): a handle() passed elsewhere would see the next
  // arena's memory. release_spare_arena() frees the kept segment.
  bool reuse = false;
};

// Frees the segment kept for the next arena (ArenaOptions::reuse), if any, unless
// it has `unless_bytes` bytes (the size of an arena about to be created).
void release_spare_arena(std::size_t unless_bytes = 0);

// One line on whether huge pages can back an arena with these options, and if not,
// why (for the CLI to print before training). `ok` is what Arena::huge_pages()
// will report.
struct HugePagesStatus {
  bool ok = false;
  std::string message;
};
HugePagesStatus huge_pages_status(const ArenaOptions& options);

class Arena {
 public:
  // 128, not 64: the adjacent-line prefetcher pulls cache lines in pairs, so
  // per-worker counters 64 bytes apart would still share traffic.
  static constexpr std::size_t kAlignment = 128;
  static constexpr std::size_t kMaxBlocks = 64;

  // Creates, sizes (reserving the pages, so a full /dev/shm is a clear
  // ResourceError here rather than a SIGBUS later) and maps the segment.
  static Arena create(const std::vector<BlockSpec>& blocks, const ArenaOptions& options = {});

  Arena() = default;
  Arena(Arena&&) noexcept = default;
  Arena& operator=(Arena&&) noexcept = default;

  bool has(const std::string& name) const;
  // Names of the blocks, in creation order.
  std::vector<std::string> names() const;
  std::span<std::byte> block(const std::string& name) const;
  template <class T>
  std::span<T> array(const std::string& name) const {
    auto b = block(name);
    return {reinterpret_cast<T*>(b.data()), b.size() / sizeof(T)};
  }
  template <class T>
  T& object(const std::string& name) const {
    return *reinterpret_cast<T*>(block(name).data());
  }

  std::size_t size() const noexcept { return size_; }
  std::byte* base() const noexcept { return base_; }
  // The name the segment had while it existed (for messages).
  const std::string& name() const noexcept { return name_; }
  bool file_backed() const noexcept { return file_backed_; }
  // True when options.huge_pages was asked for and the arena got them: on /dev/shm,
  // when /proc/self/smaps shows part of the mapping on 2 MiB pages.
  bool huge_pages() const noexcept { return huge_pages_; }

  // Maps every page of the segment into this process, once (see ArenaOptions::map_now).
  void map_all();

  // Maps [at, at + bytes), page-aligned inside the arena, private and anonymous in
  // this process (a run's hot window, before its workers fork: each inherits its own
  // copy); false, with errno, where that fails. Until map_shared_again puts the
  // segment's pages back, the segment is not kept for reuse (ArenaOptions::reuse:
  // the next arena would have a private hole, or, after a failed mapping, none).
  bool map_private(std::byte* at, std::size_t bytes) noexcept;
  // Maps that range to the segment's own pages again, once the private mapping is
  // done with; where that fails the segment stays not kept.
  void map_shared_again(std::byte* at, std::size_t bytes) noexcept;

  // Bytes a segment holding these blocks needs (header included).
  static std::size_t required_bytes(const std::vector<BlockSpec>& blocks);

  // The arena's handle: a file descriptor of its (nameless) segment, open as long
  // as the Arena (close-on-exec). Passed to another process (SCM_RIGHTS, as a fork
  // server's workers get it), attach() maps the same memory there.
  int handle() const noexcept { return fd_ ? *fd_ : -1; }
  // Maps the arena behind `fd` (a handle() received from its creator), block table
  // and all; the Arena keeps its own duplicate of fd. Throws Error when fd holds no
  // arena of this user and version.
  static Arena attach(int fd);

 private:
  // The Boost mapped_region, type-erased so this header does not pull in Boost.
  std::shared_ptr<void> region_;
  std::shared_ptr<int> fd_;  // closed with the last copy
  std::shared_ptr<bool> keep_;  // reuse: false once the segment may not be kept
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;
  bool file_backed_ = false;
  bool huge_pages_ = false;
  bool mapped_ = false;  // every page mapped here (map_all has nothing to do)
};

// Names of this tool's segments that a dead process left behind (crash in the
// microseconds between create and unlink); removes those owned by this user.
// Returns the names removed.
std::vector<std::string> cleanup_stale_segments();

// The Gloo rendezvous folders (hogwild-gloo-* in the temporary directory) of runs
// that are gone: a run holds a lock on the folder's `owner` file for its life (the
// lock, not a pid, so that no live run's folder is taken for a dead one's), and a
// folder whose lock can be taken is removed. Returns the folders removed.
std::vector<std::string> cleanup_stale_rendezvous();
// Makes a run's rendezvous folder and locks it as cleanup_stale_rendezvous reads it;
// returns the folder and the locked descriptor (closed, and the folder removed, by
// the caller at the run's end). ResourceError when it cannot.
std::pair<std::string, int> make_rendezvous_dir();

}  // namespace hogwild
