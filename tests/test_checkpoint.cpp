// Checkpoints: the file format (round trip, every malformed case named), atomic
// writes that never lose the previous file, and resume through the trainer: a
// serial run resumed from a checkpoint is bit-identical to one that never stopped.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "hogwild/checkpoint.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/error.hpp"
#include "hogwild/trainer.hpp"
#include "ridge.hpp"
#include "fuzz/reseal.hpp"
#include "support.hpp"
#include "trainer/run.hpp"

using namespace hogwild;

namespace {

Checkpoint sample() {
  Checkpoint c;
  c.config = {{"--model", "logistic"}, {"--lr", "0.5"}};
  c.data = {100, 20, 300, 0xdeadbeef};
  c.restarts = 2;
  c.train_seconds = 1.5;
  c.workers = {{2, 2, 17, 217, 3.5, {10.0, 7.5}}, {3, 2, 50, 150, 1.25, {9.0, 8.0, 6.0}}};
  c.tensors = {{"param:w", {1, 2, 3, -4.5f}}, {"param:b", {0.25f}}, {"state:w", {0, 0, 1, 1}}};
  return c;
}

std::string error_of(std::string_view bytes) {
  try {
    parse_checkpoint(bytes, "ck.bin");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

// Recomputes the trailing CRC after a deliberate edit, so the parser gets past it.
void reseal(std::string& b) { test::reseal_checkpoint(b); }

TrainConfig serial_config(unsigned epochs) {
  TrainConfig c;
  c.mode = Mode::serial;
  c.epochs = epochs;
  c.step_size.lr0 = 0.5f;
  c.step_size.decay = 0.9f;
  return c;
}

}  // namespace

TEST_CASE("a checkpoint round-trips through bytes and through a file") {
  const Checkpoint c = sample();
  const std::string bytes = serialize_checkpoint(c);
  CHECK(bytes.substr(0, 8) == "HWCKPT01");
  CHECK(parse_checkpoint(bytes, "x") == c);
  CHECK(c.epochs_done() == 2);
  test::TempDir dir;
  write_checkpoint(c, dir.file("ck.bin"));
  CHECK(read_checkpoint(dir.file("ck.bin")) == c);
  CHECK(!std::filesystem::exists(dir.file("ck.bin.tmp." + std::to_string(getpid()))));
}

TEST_CASE("tensors read from where they live, chunk by chunk, write the same file as copies") {
  const Checkpoint c = sample();
  // One tensor longer than a chunk, read in pieces; the others as copies before it.
  std::vector<float> big(kCheckpointChunkFloats + 3);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000) - 0.5f;
  std::vector<std::pair<std::size_t, std::size_t>> reads;
  const TensorSource source{"param:big", big.size(), [&](std::size_t begin, std::size_t n, float* out) {
                              reads.emplace_back(begin, n);
                              std::copy_n(big.data() + begin, n, out);
                            }};
  test::TempDir dir;
  write_checkpoint(c, std::span(&source, 1), dir.file("ck.bin"));
  Checkpoint whole = c;
  whole.tensors.push_back({"param:big", big});
  CHECK(test::read_text(dir.file("ck.bin")) == serialize_checkpoint(whole));
  CHECK(reads == std::vector<std::pair<std::size_t, std::size_t>>{{0, kCheckpointChunkFloats},
                                                                  {kCheckpointChunkFloats, 3}});
  // A read that throws (a non-finite weight) leaves the previous file and no temporary.
  const TensorSource failing{"param:w", 4, [](std::size_t, std::size_t, float*) {
                               throw Error("weight w[2] = nan");
                             }};
  CHECK_THROWS_WITH_AS(write_checkpoint(c, std::span(&failing, 1), dir.file("ck.bin")),
                       "weight w[2] = nan", Error);
  CHECK(read_checkpoint(dir.file("ck.bin")) == whole);
  CHECK(test::entries_in(dir.path()) == 1);
}

TEST_CASE("empty tensors and no options round-trip (found by fuzz_checkpoint under UBSan)") {
  Checkpoint c = sample();
  c.config.clear();
  c.tensors = {{"param:empty", {}}, {"state:empty", {}}};
  c.workers[0].epoch_loss.clear();
  c.workers[0].epochs_done = 0;
  CHECK(parse_checkpoint(serialize_checkpoint(c), "x") == c);
}

TEST_CASE("malformed checkpoints are refused with what is wrong, never a crash") {
  const std::string good = serialize_checkpoint(sample());
  CHECK(error_of("") .find("bad magic") != std::string::npos);
  CHECK(error_of("HWDSET01xxxxxxxxxxxxxxxxxxxx").find("bad magic") != std::string::npos);
  CHECK(error_of(good.substr(0, 12)).find("truncated") != std::string::npos);
  // Every truncation is an error, none reads past the end.
  for (std::size_t n = 0; n < good.size(); ++n) CHECK_FALSE(error_of(good.substr(0, n)).empty());
  std::string b = good;
  b[8] = 4;  // version 4
  CHECK(error_of(b).find("format version 4, this build reads 2 and 3") != std::string::npos);
  b[8] = 1;  // a version 1 checkpoint: its fingerprint hashed only the data's edges
  CHECK(error_of(b).find("format version 1, this build reads 2 and 3") != std::string::npos);
  b = good;
  b[12] = 0x2e;  // the reserved word (found by fuzz_checkpoint: it parsed, then re-serialized differently)
  reseal(b);
  CHECK(error_of(b).find("reserved header field is 0x2e") != std::string::npos);
  // A flipped bit is named by the section it is in (each has its checksum), the
  // file's own checksum last.
  const std::size_t options_at = 24, tensor_at = good.find("param:w") - 4 - 8;
  for (const auto& [at, section] :
       {std::pair{options_at + 8 + 6, std::string("the options section (bytes 24 to ")},
        std::pair{good.find("param:w") + 12, std::string("the tensor 1 ('param:w') section (bytes ") +
                                                 std::to_string(tensor_at) + " to "},
        std::pair{good.size() - 2, std::string("the file's checksum (its last 4 bytes)")}}) {
    const std::size_t flipped = at;  // (clang 14 captures no structured binding)
    CAPTURE(flipped);
    b = good;
    b[at] ^= 0x40;
    CHECK(error_of(b).find("checksum mismatch in " + section) != std::string::npos);
  }
  b = good;
  b[options_at + 7] ^= 0x01;  // the options section's length
  CHECK(error_of(b).find("the options section at byte 24 declares") != std::string::npos);
  b = good + "x";
  CHECK(error_of(b).find("truncated or padded") != std::string::npos);
  // A hostile count inside a correctly sealed file: refused before allocating.
  b = good;
  const std::size_t count_at = 8 + 4 + 4 + 8 + 8;  // the option count, first in the options section
  const std::uint32_t huge = 0xffffffffu;
  std::memcpy(b.data() + count_at, &huge, 4);
  reseal(b);
  CHECK(error_of(b).find("the options section: option count 4294967295 is impossible") !=
        std::string::npos);
  b = good;
  const auto at = b.find("param:w") + 7;  // the tensor's u64 value count follows its name
  const std::uint64_t many = 1ull << 60;
  std::memcpy(b.data() + at, &many, 8);
  reseal(b);
  CHECK(error_of(b).find("declares 1152921504606846976 values") != std::string::npos);
}

TEST_CASE("a failed write (file too large) leaves the previous checkpoint intact") {
  test::TempDir dir;
  const std::string path = dir.file("ck.bin");
  Checkpoint small = sample();
  write_checkpoint(small, path);
  Checkpoint big = sample();
  big.tensors[0].values.assign(1 << 20, 1.0f);  // 4 MiB
  pid_t pid = fork();
  if (pid == 0) {  // a child with a 64 KiB file-size limit: write() fails with EFBIG
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{64 * 1024, 64 * 1024};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write_checkpoint(big, path);
    } catch (const ResourceError& e) {
      _exit(std::strstr(e.what(), "intact") ? 4 : 5);
    } catch (...) {
      _exit(6);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 4);
  CHECK(read_checkpoint(path) == small);
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  CHECK(files == 1);  // the temporary is gone
}

TEST_CASE("kill -9 in the middle of replacing a checkpoint leaves the old one, loadable") {
  // A 64 MB write to tmpfs takes milliseconds: kills 0-10 ms after the writer
  // starts land inside it most of the time, which a writer that replaced the file
  // in place (rather than rename) would not survive.
  char shm_dir[] = "/dev/shm/ckpt-atomic-XXXXXX";
  REQUIRE(mkdtemp(shm_dir) != nullptr);
  struct Remove {
    const char* p;
    ~Remove() { std::filesystem::remove_all(p); }
  } remove{shm_dir};
  const std::string path = std::string(shm_dir) + "/ck.bin";
  const Checkpoint old = sample();
  write_checkpoint(old, path);
  Checkpoint big = sample();
  big.tensors[0].values.assign(16 << 20, 0.5f);
  const std::string bytes = serialize_checkpoint(big);
  std::srand(99);
  int inside = 0;
  for (int i = 0; i < 10; ++i) {
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      (void)!write(ready[1], "x", 1);
      write_file_atomically(path, bytes);
      _exit(0);
    }
    close(ready[1]);
    char c;
    (void)!read(ready[0], &c, 1);
    close(ready[0]);
    std::this_thread::sleep_for(std::chrono::microseconds(std::rand() % 10000));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status)) {  // it finished first: put the old one back
      write_checkpoint(old, path);
      continue;
    }
    const std::string tmp = path + ".tmp." + std::to_string(pid);
    inside += std::filesystem::exists(tmp);
    std::filesystem::remove(tmp);
    INFO("kill " << i);
    CHECK(read_checkpoint(path) == old);
  }
  MESSAGE(inside << " of 10 kills landed inside the write");
  CHECK(inside >= 3);
}

TEST_CASE("serial: 2 epochs + resume to 5 is bit-identical to 5 epochs straight") {
  auto [tr, te] = test::generated_problem(3000, 500, 200, 10, 0.05, 3);
  test::TempDir dir;
  const auto straight = train(serial_config(5), tr, &te);
  TrainConfig first = serial_config(2);
  first.checkpoint = dir.file("ck.bin");
  train(first, tr, &te);
  const Checkpoint saved = read_checkpoint(first.checkpoint);
  CHECK(saved.epochs_done() == 2);
  CHECK(saved.workers[0].samples == 2 * tr.rows());
  TrainConfig second = serial_config(5);
  second.resume = first.checkpoint;
  const auto resumed = train(second, tr, &te);
  CHECK(resumed.resumed_epochs == 2);
  CHECK(resumed.history.size() == 3);
  CHECK(resumed.history.front().epoch == 3);
  CHECK(resumed.samples == straight.samples);
  CHECK(resumed.parameters == straight.parameters);
  CHECK(resumed.history.back().train_loss == straight.history.back().train_loss);
}

TEST_CASE("hogwild: a resumed run continues every worker and converges") {
  const Dataset d = test::linear_data(4000);
  test::TempDir dir;
  TrainConfig c;
  c.workers = 2;
  c.epochs = 2;
  c.step_size.lr0 = 0.05f;
  c.checkpoint = dir.file("ck.bin");
  test::Ridge<> model;
  train(c, model, d, &d);
  c.epochs = 4;
  c.resume = c.checkpoint;
  test::Ridge<> again;
  const auto r = train(c, again, d, &d);
  CHECK(r.samples == 4 * d.rows());
  CHECK(r.history.size() == 2);
  CHECK(r.parameters.at("theta")[0] == doctest::Approx(2.0).epsilon(0.02));
  CHECK(read_checkpoint(c.checkpoint).epochs_done() == 4);
}

TEST_CASE("a dense_u8 set's fingerprint covers its pixels and equals its widened copy's") {
  std::vector<std::uint8_t> pixels(3 * 50);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7);
  const std::vector<float> labels = {0, 1, 2};
  const Dataset d = Dataset::dense_u8(labels, pixels, 50, "a");
  const DataFingerprint f = DataFingerprint::of(d);
  CHECK(f.rows == 3);
  CHECK(f.cols == 50);
  CHECK(f.nnz == 150);
  // Bytes or floats: the same data, the same fingerprint (a checkpoint of either resumes).
  CHECK(DataFingerprint::of(d.widened()) == f);
  for (std::size_t at : {std::size_t{0}, std::size_t{77}, pixels.size() - 1}) {
    auto other = pixels;
    other[at] ^= 1;
    CAPTURE(at);
    CHECK_FALSE(DataFingerprint::of(Dataset::dense_u8(labels, other, 50, "b")) == f);
  }
  // Every pixel counts, the middle ones too (only the first and last 64 KiB were
  // hashed: a file whose middle rows changed resumed silently).
  std::vector<std::uint8_t> big(300 * 784, 9);
  const std::vector<float> big_labels(300, 1.0f);
  const DataFingerprint g = DataFingerprint::of(Dataset::dense_u8(big_labels, big, 784, "c"));
  CHECK(DataFingerprint::of(Dataset::dense_u8(big_labels, big, 784, "c").widened()) == g);
  for (std::size_t at : {std::size_t{0}, big.size() / 2, big.size() - 1}) {
    auto other = big;
    other[at] = 10;
    CHECK_FALSE(DataFingerprint::of(Dataset::dense_u8(big_labels, other, 784, "d")) == g);
  }
}

TEST_CASE("resume refuses other data, other options or a finished run, saying what differs") {
  auto [tr, te] = test::generated_problem(1000, 100, 50, 5, 0.05, 3);
  auto [other, unused] = test::generated_problem(1000, 100, 50, 5, 0.05, 4);
  test::TempDir dir;
  TrainConfig c = serial_config(2);
  c.checkpoint = dir.file("ck.bin");
  train(c, tr, &te);
  auto refused = [&, &te = te](TrainConfig r, const Dataset& data) -> std::string {
    r.resume = c.checkpoint;
    r.checkpoint.clear();
    try {
      train(r, data, &te);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  TrainConfig r = serial_config(4);
  r.step_size.lr0 = 0.25f;
  r.seed = 9;
  auto msg = refused(r, tr);
  MESSAGE(msg);
  CHECK(msg.find("written with --lr 0.5, --seed 1; this run has --lr 0.25, --seed 9") !=
        std::string::npos);
  msg = refused(serial_config(4), other);
  CHECK(msg.find("training data of 1000 rows") != std::string::npos);
  CHECK(msg.find("hash") != std::string::npos);
  msg = refused(serial_config(2), tr);
  CHECK(msg.find("it has already completed 2 epoch(s)") != std::string::npos);
  r = serial_config(4);
  r.model = "hinge";
  CHECK(refused(r, tr).find("--model logistic") != std::string::npos);
  // Another partition trains other rows at each position: refused too.
  r = serial_config(4);
  r.partition = Partition::contiguous;
  CHECK(refused(r, tr).find("written with --partition shuffled; this run has --partition "
                            "contiguous") != std::string::npos);
}

TEST_CASE("a checkpoint from before --partition reads as contiguous") {
  auto [tr, te] = test::generated_problem(1000, 100, 50, 5, 0.05, 3);
  test::TempDir dir;
  TrainConfig c = serial_config(2);
  c.partition = Partition::contiguous;
  c.checkpoint = dir.file("ck.bin");
  train(c, tr, &te);
  Checkpoint old = read_checkpoint(c.checkpoint);
  std::erase_if(old.config, [](const auto& o) { return o.first == "--partition"; });
  write_checkpoint(old, c.checkpoint);
  TrainConfig r = serial_config(4);
  r.resume = c.checkpoint;
  r.checkpoint.clear();
  CHECK_THROWS_WITH_AS(train(r, tr, &te), doctest::Contains("--partition contiguous"), ConfigError);
  r.partition = Partition::contiguous;
  CHECK(train(r, tr, &te).resumed_epochs == 2);
}

namespace {
// A Ridge hook that writes NaN into theta[1] after the `at`-th example's step.
struct Poison {
  std::size_t* seen;
  std::size_t at;
  void operator()(std::uint32_t, const ParamSet& p) const {
    if (++*seen == at) p.data(0)[1] = std::nanf("");
  }
};
}  // namespace

TEST_CASE("non-finite weights stop the run naming epoch and step; the good checkpoint stays") {
  // The last row of epoch 3 leaves a NaN weight after its (finite) loss was
  // counted: only a check of the weights catches it before epoch 3's checkpoint.
  const Dataset d = test::linear_data(1000);
  std::size_t seen = 0;
  test::Ridge<Poison> model(Poison{&seen, 3 * d.rows()});
  test::TempDir dir;
  TrainConfig c = serial_config(5);
  c.step_size.lr0 = 0.05f;
  c.checkpoint = dir.file("ck.bin");
  c.checkpoint_every = 1e-9;  // after every epoch
  std::string msg;
  try {
    train(c, model, d, &d);
  } catch (const Error& e) {
    msg = e.what();
  }
  MESSAGE(msg);
  CHECK(msg.find("training diverged after epoch 3, step 3000") != std::string::npos);
  CHECK(msg.find("theta[1] = nan") != std::string::npos);
  CHECK(msg.find("try a smaller --lr") != std::string::npos);
  const Checkpoint kept = read_checkpoint(c.checkpoint);
  CHECK(kept.epochs_done() == 2);
  for (float v : kept.tensors.at(0).values) CHECK(std::isfinite(v));
}

TEST_CASE("hogwild_train killed at random moments while checkpointing always leaves a loadable one" * doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  // 16 MB of weights, written to tmpfs back to back (no disk traffic): a good
  // share of the kills lands inside a write.
  auto [train_file, test_file] = test::problem_files(dir, 20000, 4000000);
  char shm_dir[] = "/dev/shm/ckpt-kill-XXXXXX";
  REQUIRE(mkdtemp(shm_dir) != nullptr);
  struct Remove {
    const char* p;
    ~Remove() { std::filesystem::remove_all(p); }
  } remove{shm_dir};
  const std::string ck = std::string(shm_dir) + "/ck.bin";
  std::srand(12345);
  const int kills = 20;
  int loaded = 0;
  for (int i = 0; i < kills; ++i) {
    std::filesystem::remove(ck);
    auto bg = test::start_train({"--train", train_file, "--workers", "2", "--epochs", "100000",
                                 "--checkpoint", ck, "--checkpoint-every", "0.001", "-q"},
                                dir);
    // Checkpoints are written back to back: after the first one exists, a kill
    // lands in the middle of writing a later one, or between two.
    for (int t = 0; t < 2000 && !std::filesystem::exists(ck); ++t)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::rand() % 300));
    kill(bg.pid, SIGKILL);
    CHECK(test::wait_exit(bg.pid, 10) == -SIGKILL);
    std::string error;
    try {
      read_checkpoint(ck);
      ++loaded;
    } catch (const Error& e) {
      error = e.what();
    }
    INFO("kill " << i << ": " << error);
    CHECK(error.empty());
  }
  std::size_t temporaries = 0;
  for (auto& e : std::filesystem::directory_iterator(shm_dir))
    temporaries += e.path().filename().string().find(".tmp.") != std::string::npos;
  MESSAGE(loaded << " of " << kills << " checkpoints loadable after kill -9; " << temporaries
                 << " kills landed inside a write (a ck.bin.tmp.<pid> left behind)");
}

TEST_CASE("a NaN weight left by the very last row, with no test set, still stops the run") {
  // No evaluation and no checkpoint: nothing reads the weights between epochs, so
  // only the final scan can see it.
  const Dataset d = test::linear_data(1000);
  std::size_t seen = 0;
  test::Ridge<Poison> model(Poison{&seen, 2 * d.rows()});
  std::string msg;
  try {
    train(serial_config(2), model, d, nullptr);
  } catch (const Error& e) {
    msg = e.what();
  }
  MESSAGE(msg);
  CHECK(msg.find("training diverged after epoch 2") != std::string::npos);
  CHECK(msg.find("theta[1] = nan") != std::string::npos);
}

TEST_CASE("a worker's record is read from one publication, however fast it publishes") {
  // The writer publishes (position k, loss k) as fast as it can; a reader that
  // took position from one publication and loss from the next (the checkpoint's
  // read before the seqlock) would see them differ.
  WorkerProgress p;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::uint64_t k = 1; !done.load(std::memory_order_relaxed); ++k)
      detail::publish_record(p, k, k, static_cast<double>(k));
  });
  std::size_t reads = 0, torn = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    const WorkerState s = detail::read_record(p, nullptr, 1000);
    torn += static_cast<double>(s.position) != s.loss;
    ++reads;
  }
  done = true;
  writer.join();
  MESSAGE(reads << " reads, " << torn << " torn");
  CHECK(reads > 1000);
  CHECK(torn == 0);
}

