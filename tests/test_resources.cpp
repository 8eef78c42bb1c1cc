// Resource limits end to end: memory too small for the model, a full disk while
// writing a checkpoint or metrics, absurd worker counts. Each is a clear message
// (exit 4 or 2), and nothing already saved is lost.
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <thread>

#include "hogwild/checkpoint.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // their shadow memory needs an unlimited address space
#else
constexpr bool kSanitized = false;
#endif

test::RunResult train_cli(std::vector<std::string> args, const std::vector<std::string>& prefix = {}) {
  std::vector<std::string> argv = prefix;
  argv.push_back(test::hogwild_train_path());
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run(argv, 120);
}

}  // namespace

TEST_CASE("a model larger than the available memory is refused before anything is allocated") {
  test::TempDir dir;
  // Softmax over 3 classes and 4e9 features: 48 GB of weights, 144 GB of arena.
  test::write_text(dir.file("huge.svm"), "0 1:1\n1 2:1\n2 4000000000:1\n");
  auto r = train_cli({"--train", dir.file("huge.svm"), "--model", "softmax", "--epochs", "1"});
  INFO(r.out);
  CHECK(r.exit_code == 4);
  CHECK(r.out.find("of memory") != std::string::npos);
  CHECK(r.out.find("but only") != std::string::npos);
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("an address-space limit (ulimit -v) too small for the model is a clear error" * doctest::test_suite("address_space")) {
  if (kSanitized) {
    test::skip("sanitizers need an unlimited address space");
    return;
  }
  test::TempDir dir;
  test::write_text(dir.file("big.svm"), "0 1:1\n1 100000000:1\n");  // 400 MB of weights
  auto r = train_cli({"--train", dir.file("big.svm"), "--epochs", "1"},
                     {"/usr/bin/prlimit", "--as=1000000000", "--"});
  INFO(r.out);
  CHECK(r.exit_code == 4);
  CHECK(r.out.find("address-space limit (ulimit -v)") != std::string::npos);
}

TEST_CASE("a full disk while writing a checkpoint stops the run with exit 4; the old one is intact" * doctest::test_suite("tmpfs")) {
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 2000, 50000);  // 200 KB checkpoints
  // A 300 KiB tmpfs: room for one checkpoint, not for its replacement beside it.
  const std::string disk = dir.file("disk");
  std::filesystem::create_directory(disk);
  if (mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=300k") != 0) {
    test::skip(std::string("cannot mount a small tmpfs here (needs root): ") + std::strerror(errno));
    return;
  }
  struct Unmount {
    std::string p;
    ~Unmount() { umount2(p.c_str(), MNT_DETACH); }
  } unmount{disk};
  const std::string ck = disk + "/ck.bin";
  auto first = train_cli({"--train", train, "--epochs", "2", "--checkpoint", ck, "-q"});
  REQUIRE(first.exit_code == 0);
  const std::string saved = test::read_text(ck);
  auto r = train_cli({"--train", train, "--epochs", "4", "--checkpoint", ck, "--resume", ck,
                      "--checkpoint-every", "0.001", "-q"});
  INFO(r.out);
  CHECK(r.exit_code == 4);
  CHECK(r.out.find("cannot write " + ck + ": No space left on device") != std::string::npos);
  CHECK(r.out.find("the previous version of the file, if any, is intact") != std::string::npos);
  CHECK(test::read_text(ck) == saved);
  CHECK_NOTHROW(read_checkpoint(ck));
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(disk)) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary left
}

TEST_CASE("a full disk while writing metrics or the summary is exit 4 naming the file") {
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 500, 100);
  auto r = train_cli({"--train", train, "--epochs", "2", "--metrics", "/dev/full", "-q"});
  INFO(r.out);
  CHECK(r.exit_code == 4);
  CHECK(r.out.find("cannot write metrics to /dev/full: No space left on device") != std::string::npos);
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("worker counts: above the cores a warning, absurd ones refused") {
  test::TempDir dir;
  auto [train, test_file] = test::problem_files(dir, 500, 100);
  const unsigned cores = std::thread::hardware_concurrency();
  auto r = train_cli({"--train", train, "--epochs", "1", "--workers", std::to_string(cores + 1), "-q"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("workers on " + std::to_string(cores) + " cores") != std::string::npos);
  r = train_cli({"--train", train, "--workers", "5000"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--workers 5000 is absurd (at most 1024)") != std::string::npos);
}
