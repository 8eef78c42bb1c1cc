// The parameter arena: create, lay out, share across fork, remove; the robust mutex.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hogwild/arena.hpp"
#include "hogwild/error.hpp"
#include "memory/robust_mutex.hpp"
#include "hogwild/update_policy.hpp"
#include "process.hpp"
#include "support.hpp"

using namespace hogwild;

TEST_CASE("arena blocks are zeroed, aligned, distinct and found by name") {
  Arena a = Arena::create({{"w", 1000 * sizeof(float)}, {"b", 3}, {"big", 1 << 20}});
  auto w = a.array<float>("w");
  auto b = a.block("b");
  auto big = a.block("big");
  CHECK(w.size() == 1000);
  CHECK(b.size() == 3);
  CHECK(reinterpret_cast<std::uintptr_t>(w.data()) % Arena::kAlignment == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % Arena::kAlignment == 0);
  CHECK(std::all_of(w.begin(), w.end(), [](float v) { return v == 0; }));
  CHECK(std::all_of(big.begin(), big.end(), [](std::byte v) { return v == std::byte{0}; }));
  // Blocks do not overlap.
  CHECK(reinterpret_cast<std::byte*>(w.data() + w.size()) <= b.data());
  CHECK(b.data() + b.size() <= big.data());
  CHECK(a.has("w"));
  CHECK_FALSE(a.has("nope"));
  CHECK_THROWS_AS(a.block("nope"), Error);
  CHECK(a.size() >= Arena::required_bytes({{"w", 4000}, {"b", 3}, {"big", 1 << 20}}));
}

TEST_CASE("the segment's name is gone from /dev/shm as soon as it is mapped") {
  const auto before = test::our_shm_entries();
  Arena a = Arena::create({{"w", 4096}});
  CHECK(a.name().rfind("hogwild-" + std::to_string(getuid()) + "-" + std::to_string(getpid()), 0) == 0);
  CHECK(test::our_shm_entries() == before);
  CHECK_FALSE(a.file_backed());
}

TEST_CASE("workers inherit the mapping across fork and write to the same floats") {
  Arena a = Arena::create({{"w", 64 * sizeof(float)}});
  auto w = a.array<float>("w");
  for (int k = 0; k < 4; ++k) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      for (int i = 0; i < 16; ++i) detail::relaxed_store(&w[k * 16 + i], static_cast<float>(k + 1));
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
  }
  for (int k = 0; k < 4; ++k) CHECK(w[k * 16 + 15] == static_cast<float>(k + 1));
}

// What a fork server's worker does: a process forked before the arena existed gets
// its handle over a socket and maps the same floats.
TEST_CASE("an arena's handle, sent over a socket, maps the same memory in a process "
          "forked before it existed") {
  for (const bool file_backed : {false, true}) {
    test::TempDir dir;
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // no doctest macros here: the exit status says what failed
      ::close(sv[0]);
      int code = 0;
      try {
        std::uint32_t n = 0;
        const auto fds = detail::recv_message(sv[1], &n, sizeof n);
        if (fds.size() != 1) _exit(10);
        Arena a = Arena::attach(fds[0]);
        ::close(fds[0]);  // the Arena keeps its own
        auto w = a.array<float>("w");
        if (w.size() != n || a.names() != std::vector<std::string>{"x", "w"}) _exit(11);
        for (std::uint32_t i = 0; i < n; ++i)
          if (detail::relaxed_load(&w[i]) != static_cast<float>(i)) code = 12;
        detail::relaxed_store(&a.array<float>("x")[0], 42.f);
      } catch (...) {
        code = 13;
      }
      _exit(code);
    }
    ::close(sv[1]);
    Arena a = Arena::create({{"x", 64}, {"w", 100 * sizeof(float)}},
                            ArenaOptions{file_backed ? dir.path().string() : ""});
    REQUIRE(a.handle() >= 0);
    auto w = a.array<float>("w");
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
    const std::uint32_t n = 100;
    detail::send_message(sv[0], &n, sizeof n, {a.handle()});
    ::close(sv[0]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    INFO("file-backed " << file_backed);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(a.array<float>("x")[0] == 42.f);
  }
}

namespace {
// The segment an arena maps: the same inode, the same pages.
ino_t inode(const Arena& a) {
  struct stat st {};
  REQUIRE(fstat(a.handle(), &st) == 0);
  return st.st_ino;
}
}  // namespace

TEST_CASE("an ended arena's segment is zeroed and taken by this process's next arena of its size") {
  // A size no other case uses: no spare of it exists before this case.
  const std::vector<BlockSpec> blocks{{"w", (1 << 16) + 3 * 4096 + 40}};
  ArenaOptions reuse;
  reuse.reuse = true;
  ino_t first;
  {
    Arena a = Arena::create(blocks, reuse);
    first = inode(a);
    auto w = a.block("w");
    std::fill(w.begin(), w.end(), std::byte{0xab});
  }
  Arena b = Arena::create(blocks, reuse);
  CHECK(inode(b) == first);  // the same pages, no new allocation
  auto w = b.block("w");
  CHECK(std::all_of(w.begin(), w.end(), [](std::byte v) { return v == std::byte{0}; }));
  CHECK(b.array<float>("w").size() == blocks[0].bytes / sizeof(float));
  {
    Arena c = Arena::create(blocks, reuse);  // b holds the segment: a new one
    CHECK(inode(c) != first);
    Arena d = Arena::create({{"w", 4096}}, reuse);  // another size: a new one
    CHECK(inode(d) != first);
  }
  const ino_t held = [&] {  // a new one (the spare was d's, of another size): the spare
    Arena e = Arena::create(blocks, reuse);
    return inode(e);
  }();
  // A forked child does not take its parent's spare (the parent may reuse it).
  const pid_t child = test::fork_child([&] {
    Arena f = Arena::create(blocks, reuse);
    struct stat st {};
    return fstat(f.handle(), &st) == 0 && st.st_ino != held ? 0 : 1;
  });
  CHECK(test::wait_exit(child, 30) == 0);
  Arena g = Arena::create(blocks, reuse);
  CHECK(inode(g) == held);
  // Without `reuse`, an arena neither takes the spare nor becomes it; a create of
  // another kind frees it (a kept segment is not in the way of a --shm-dir or
  // huge-page arena, or of one too large to keep).
  const ino_t g_inode = inode(g);
  { Arena plain = Arena::create(blocks); }
  { Arena h = Arena::create(blocks, reuse); CHECK(inode(h) != g_inode); }  // plain's not kept
  g = Arena{};  // g's segment becomes the spare
  { Arena other = Arena::create({{"w", 4096}}); }  // frees it
  Arena i = Arena::create(blocks, reuse);
  CHECK(inode(i) != g_inode);
  // release_spare_arena frees it too, unless it has the size asked for.
  const ino_t i_inode = inode(i);
  i = Arena{};
  release_spare_arena(Arena::required_bytes(blocks));
  { Arena j = Arena::create(blocks, reuse); CHECK(inode(j) == i_inode); }
  release_spare_arena();
  Arena k = Arena::create(blocks, reuse);
  CHECK(inode(k) != i_inode);
}

TEST_CASE("a private window over an arena's pages is mapped shared again; then the segment is kept") {
  // A run's hot window: a page of the arena mapped private before the workers fork
  // (trainer/run.cpp), the segment's own again as the run ends.
  const std::vector<BlockSpec> blocks{{"w", (1 << 16) + 5 * 4096 + 40}};  // a size of its own
  ArenaOptions reuse;
  reuse.reuse = true;
  const auto page_of = [](const Arena& a) {
    const auto at = (reinterpret_cast<std::uintptr_t>(a.block("w").data()) + 4095) / 4096 * 4096;
    return reinterpret_cast<std::byte*>(at);
  };
  ino_t first;
  {
    Arena a = Arena::create(blocks, reuse);
    first = inode(a);
    std::byte* page = page_of(a);
    REQUIRE(a.map_private(page, 4096));
    page[0] = std::byte{7};
    // The segment's page, seen through a mapping of its own.
    void* other = ::mmap(nullptr, a.size(), PROT_READ | PROT_WRITE, MAP_SHARED, a.handle(), 0);
    REQUIRE(other != MAP_FAILED);
    static_cast<std::byte*>(other)[page - a.base()] = std::byte{9};
    CHECK(page[0] == std::byte{7});  // private
    a.map_shared_again(page, 4096);
    CHECK(page[0] == std::byte{9});  // the segment's again
    page[1] = std::byte{5};
    CHECK(static_cast<std::byte*>(other)[page - a.base() + 1] == std::byte{5});
    ::munmap(other, a.size());
    // A range outside the arena is refused.
    CHECK_FALSE(a.map_private(a.base() + a.size(), 4096));
    CHECK(errno == EINVAL);
    a.map_shared_again(page, 4096);  // (kept again)
  }
  {
    Arena b = Arena::create(blocks, reuse);
    CHECK(inode(b) == first);  // kept, and taken
    // Dropped with its window still private: not kept.
    REQUIRE(b.map_private(page_of(b), 4096));
  }
  Arena c = Arena::create(blocks, reuse);
  CHECK(inode(c) != first);
}

TEST_CASE("attaching what is not an arena is a clear error") {
  CHECK_THROWS_WITH_AS(Arena::attach(-1), doctest::Contains("not open"), Error);
  const int fd = memfd_create("not-an-arena", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 1 << 16) == 0);
  CHECK_THROWS_WITH_AS(Arena::attach(fd), doctest::Contains("no arena"), Error);
  ::close(fd);
}

TEST_CASE("a file-backed arena with --shm-dir leaves no file behind") {
  test::TempDir dir;
  {
    Arena a = Arena::create({{"w", 1 << 16}}, ArenaOptions{dir.path().string()});
    CHECK(a.file_backed());
    a.array<float>("w")[7] = 3.5f;
    CHECK(a.array<float>("w")[7] == 3.5f);
    CHECK(std::filesystem::is_empty(dir.path()));
  }
  CHECK(std::filesystem::is_empty(dir.path()));
  CHECK_THROWS_AS(Arena::create({{"w", 16}}, ArenaOptions{dir.file("missing")}), ConfigError);
}

TEST_CASE("a segment larger than the free space is a clear ResourceError, not a SIGBUS") {
  test::TempDir dir;
  // Far more than any test machine's disk: the message must name the size needed.
  const std::size_t huge = std::size_t{1} << 50;
  try {
    Arena::create({{"w", huge}}, ArenaOptions{dir.path().string()});
    FAIL("expected ResourceError");
  } catch (const ResourceError& e) {
    const std::string what = e.what();
    CHECK(what.find("needs") != std::string::npos);
    CHECK(what.find("MiB") != std::string::npos);
    CHECK(e.exit_code() == kExitResource);
  }
  try {
    Arena::create({{"w", huge}});
    FAIL("expected ResourceError");
  } catch (const ResourceError& e) {
    CHECK(std::string(e.what()).find("/dev/shm") != std::string::npos);
    CHECK(std::string(e.what()).find("--shm-dir") != std::string::npos);
  }
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("bad block declarations are rejected") {
  CHECK_THROWS_AS(Arena::create({{"w", 4}, {"w", 4}}), ConfigError);
  CHECK_THROWS_AS(Arena::create({{"", 4}}), ConfigError);
  CHECK_THROWS_AS(Arena::create({{std::string(60, 'x'), 4}}), ConfigError);
}

TEST_CASE("cleanup removes only this user's segments whose creator is dead") {
  // A segment named as if created by a process that no longer exists.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string stale = "hogwild-" + std::to_string(getuid()) + "-" + std::to_string(dead) + "-00000000deadbeef";
  const std::string live = "hogwild-" + std::to_string(getuid()) + "-" + std::to_string(getpid()) + "-00000000feedface";
  for (const auto& n : {stale, live}) {
    int fd = shm_open(("/" + n).c_str(), O_CREAT | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    close(fd);
  }
  auto removed = cleanup_stale_segments();
  CHECK(std::find(removed.begin(), removed.end(), stale) != removed.end());
  CHECK(std::find(removed.begin(), removed.end(), live) == removed.end());
  CHECK_FALSE(std::filesystem::exists("/dev/shm/" + stale));
  CHECK(std::filesystem::exists("/dev/shm/" + live));
  shm_unlink(("/" + live).c_str());
}

TEST_CASE("a Gloo rendezvous folder is removed by a cleanup once its run is gone, never before") {
  // In a temporary directory of this test's own (TMPDIR): another test's gloo run
  // cleans up /tmp as it starts, and counts what it leaves there.
  test::TempDir tmp;
  const char* was = std::getenv("TMPDIR");
  const std::string before = was ? was : "";
  ::setenv("TMPDIR", tmp.path().c_str(), 1);
  struct Restore {
    bool set;
    std::string value;
    ~Restore() {
      if (set) ::setenv("TMPDIR", value.c_str(), 1);
      else ::unsetenv("TMPDIR");
    }
  } restore{was != nullptr, before};
  // The run: a child that makes the folder, says where, and waits to be killed.
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t run = fork();
  if (run == 0) {
    const auto [dir, lock] = make_rendezvous_dir();
    const std::string line = dir + "\n";
    if (::write(pipe_fds[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(1);
    ::pause();
    _exit(0);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } reap{run};
  ::close(pipe_fds[1]);
  std::string dir;
  char c;
  while (::read(pipe_fds[0], &c, 1) == 1 && c != '\n') dir += c;
  ::close(pipe_fds[0]);
  REQUIRE(!dir.empty());
  CHECK(dir.starts_with(tmp.path().string()));
  CHECK(std::filesystem::exists(dir + "/owner"));
  // A folder of a run being made (no owner yet) is left alone too.
  const std::string making = (tmp.path() / "hogwild-gloo-making").string();
  std::filesystem::create_directory(making);
  auto removed = cleanup_stale_rendezvous();
  CHECK(std::find(removed.begin(), removed.end(), dir) == removed.end());
  CHECK(std::filesystem::exists(dir));  // its run lives
  ::kill(run, SIGKILL);
  ::waitpid(run, nullptr, 0);
  reap.pid = 0;
  removed = cleanup_stale_rendezvous();
  CHECK(std::find(removed.begin(), removed.end(), dir) != removed.end());
  CHECK_FALSE(std::filesystem::exists(dir));
  CHECK(std::filesystem::exists(making));
}

TEST_CASE("segments are 0600, owned by this user, with unguessable names, and never attached by name") {
  // The name is unlinked inside Arena::create; the mapping still knows its inode,
  // which /proc/self/map_files lets us stat.
  Arena a = Arena::create({{"w", 4096}});
  Arena b = Arena::create({{"w", 4096}});
  const std::string prefix = "hogwild-" + std::to_string(getuid()) + "-" + std::to_string(getpid()) + "-";
  CHECK(a.name().rfind(prefix, 0) == 0);
  CHECK(a.name().size() == prefix.size() + 16);  // 64 random bits from getrandom
  CHECK(a.name() != b.name());
  CHECK_FALSE(std::filesystem::exists("/dev/shm/" + a.name()));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool found = false;
  while (std::getline(maps, line)) {
    if (line.find(a.name()) == std::string::npos) continue;
    const std::string range = line.substr(0, line.find(' '));
    struct stat st {};
    REQUIRE(stat(("/proc/self/map_files/" + range).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == getuid());
    found = true;
  }
  CHECK(found);
}

TEST_CASE("the robust mutex survives an owner killed while holding it") {
  Arena a = Arena::create({{"m", sizeof(RobustMutex)}, {"counter", 64}});
  auto* m = new (a.block("m").data()) RobustMutex();
  m->init();
  auto* counter = reinterpret_cast<int*>(a.block("counter").data());
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    m->lock();
    *counter = 1;
    raise(SIGKILL);  // dies holding the lock
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  // Would block forever with a plain process-shared mutex.
  m->lock();
  CHECK(*counter == 1);
  CHECK(m->recoveries() == 1);
  m->unlock();
  m->lock();  // consistent again: no further recovery
  CHECK(m->recoveries() == 1);
  m->unlock();
}

TEST_CASE("modes parse and print") {
  for (Mode m : {Mode::serial, Mode::hogwild, Mode::atomic, Mode::lock}) CHECK(parse_mode(to_string(m)) == m);
  CHECK_THROWS_AS(parse_mode("wild"), ConfigError);
}

TEST_CASE("the dense vectorised path computes what a plain scalar loop computes") {
  // The reference is written here, not taken from another mode (SerialUpdate and
  // HogwildUpdate share the vector kernel): every length around the vector widths,
  // at an aligned and an unaligned start, so both the blocks and the tail count.
  for (std::size_t n : {0u, 1u, 3u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 32u, 33u, 37u, 100u}) {
    for (std::size_t offset : {0u, 1u}) {
      INFO("n " << n << " offset " << offset);
      std::vector<float> wb(n + offset), xb(n + offset);
      for (std::size_t i = 0; i < n + offset; ++i) {
        wb[i] = 0.5f * static_cast<float>(i) - 3.0f;
        xb[i] = 1.0f / static_cast<float>(i + 1);
      }
      float* w = wb.data() + offset;
      const float* x = xb.data() + offset;
      std::vector<float> expect(w, w + n);
      double dot = 0;
      for (std::size_t i = 0; i < n; ++i) {
        expect[i] = w[i] + -0.25f * x[i];
        dot += static_cast<double>(expect[i]) * x[i];
      }
      std::vector<float> serial(w, w + n), atomic(w, w + n);
      HogwildUpdate::axpy(w, -0.25f, x, n);
      SerialUpdate::axpy(serial.data(), -0.25f, x, n);
      AtomicUpdate::axpy(atomic.data(), -0.25f, x, n);
      for (std::size_t i = 0; i < n; ++i) {
        CHECK(w[i] == doctest::Approx(expect[i]).epsilon(1e-6));
        CHECK(serial[i] == doctest::Approx(expect[i]).epsilon(1e-6));
        CHECK(atomic[i] == doctest::Approx(expect[i]).epsilon(1e-6));
      }
      CHECK(HogwildUpdate::dot(w, x, n) == doctest::Approx(dot).epsilon(1e-5));
      CHECK(SerialUpdate::dot(w, x, n) == doctest::Approx(dot).epsilon(1e-5));
    }
  }
}
