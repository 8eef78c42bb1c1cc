// Binary cache and the shared mappings under every Dataset: round trips of sparse,
// dense and dense_u8 sets, sealing, and every kind of damage a cache file can carry.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool same(const Dataset& a, const Dataset& b) {
  auto eq = [](auto x, auto y) { return std::equal(x.begin(), x.end(), y.begin(), y.end()); };
  return a.layout() == b.layout() && a.rows() == b.rows() && a.cols() == b.cols() &&
         a.nnz() == b.nnz() && eq(a.labels(), b.labels()) && eq(a.offsets(), b.offsets()) &&
         eq(a.indices(), b.indices()) && eq(a.values(), b.values()) && eq(a.pixels(), b.pixels());
}

int thread_count() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}
// Threads before any test ran. ThreadSanitizer starts a thread of its own at the
// first pthread_create, so one thread is started (and joined) before counting.
const int kThreadsAtStart = [] {
  std::thread([] {}).join();
  return thread_count();
}();

// The version 1 header, as the format defines it (src/data/cache.cpp), so that the
// tests can damage chosen fields and, where wanted, fix the checksum back up.
struct Header {
  char magic[8];
  std::uint32_t version, layout;
  std::uint64_t rows, cols, nnz;
  std::uint64_t labels_offset, offsets_offset, indices_offset, values_offset;
  std::uint64_t file_size, checksum;
};
static_assert(sizeof(Header) == 88);

std::uint64_t fnv1a(const void* data, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ull;
  return h;
}

class CacheBytes {
 public:
  explicit CacheBytes(const std::string& path) : path_(path), bytes_(test::read_text(path)) {}
  Header header() const {
    Header h;
    std::memcpy(&h, bytes_.data(), sizeof h);
    return h;
  }
  void set_header(Header h, bool fix_checksum = true) {
    if (fix_checksum) h.checksum = fnv1a(&h, offsetof(Header, checksum));
    std::memcpy(bytes_.data(), &h, sizeof h);
  }
  template <class T>
  void poke(std::uint64_t offset, T value) {
    std::memcpy(bytes_.data() + offset, &value, sizeof value);
  }
  std::string& bytes() { return bytes_; }
  // Writes the damaged copy and returns open_cache's complaint.
  std::string open_error(const std::string& damaged) {
    test::write_text(damaged, bytes_);
    std::string msg = error_of<DataError>([&] { open_cache(damaged); });
    CHECK_MESSAGE(msg.rfind(damaged + ": ", 0) == 0, msg);
    return msg;
  }

 private:
  std::string path_, bytes_;
};

// Every byte value once, as 4 rows of 64 pixels, labels 0..3.
Dataset all_bytes() {
  std::vector<std::uint8_t> pixels(256);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i);
  return Dataset::dense_u8(std::vector<float>{0, 1, 2, 3}, pixels, 64, "bytes");
}

Dataset small_sparse() {
  GenerateOptions o;
  o.rows = 500;
  o.features = 300;
  o.nnz_per_row = 7;
  return generate_sparse(o);
}

}  // namespace

TEST_CASE("MappedBuffer: anonymous of size 0, sealing, mapping files") {
  auto empty = MappedBuffer::anonymous(0);
  CHECK(empty->data() != nullptr);
  CHECK(empty->size() == 0);
  empty->seal();

  auto buf = MappedBuffer::anonymous(10000);
  std::memset(buf->data(), 7, 10000);
  buf->seal();
  CHECK(buf->data()[9999] == std::byte{7});

  // release gives back the whole pages inside the range; the rest keeps its bytes.
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  auto big = MappedBuffer::anonymous(4 * page + 100);
  std::memset(big->data(), 7, big->size());
  big->release(page / 2, 3 * page + 10);  // frees pages 1 and 2 only
  CHECK(big->data()[page - 1] == std::byte{7});
  CHECK(big->data()[page] == std::byte{0});
  CHECK(big->data()[3 * page - 1] == std::byte{0});
  CHECK(big->data()[3 * page] == std::byte{7});
  big->release(0, big->size());  // the partial last page stays
  CHECK(big->data()[0] == std::byte{0});
  CHECK(big->data()[4 * page + 99] == std::byte{7});
  big->seal();

  test::TempDir dir;
  test::write_text(dir.file("f"), "hello");
  auto f = MappedBuffer::map_file(dir.file("f"));
  CHECK(f->size() == 5);
  CHECK(std::memcmp(f->data(), "hello", 5) == 0);
  test::write_text(dir.file("empty"), "");
  std::string msg = error_of<IoError>([&] { MappedBuffer::map_file(dir.file("empty")); });
  CHECK_MESSAGE(contains(msg, dir.file("empty") + ": empty file"), msg);
  msg = error_of<IoError>([&] { MappedBuffer::map_file(dir.file("none")); });
  CHECK_MESSAGE(contains(msg, "cannot open " + dir.file("none") + ": No such file or directory"),
                msg);
}

TEST_CASE("a dataset's arrays are sealed: a stray write faults") {
  Dataset d = small_sparse();
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);  // die of it, without doctest's or a sanitizer's report
    const_cast<float*>(d.values().data())[0] = 42.0f;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK(d.values()[0] != 42.0f);
}

TEST_CASE("Dataset::sparse and dense copy the arrays, 64-byte aligned") {
  std::vector<float> labels = {1, 0, 1};
  std::vector<std::uint64_t> offsets = {0, 2, 2, 3};
  std::vector<std::uint32_t> indices = {1, 4, 0};
  std::vector<float> values = {0.5f, 2, -1};
  Dataset d = Dataset::sparse(labels, offsets, indices, values, 5, "mem");
  CHECK(d.rows() == 3);
  CHECK(d.nnz() == 3);
  CHECK(d.row(1).nnz == 0);
  CHECK(d.row(2).index[0] == 0);
  CHECK(d.bytes() == 3 * 4 + 4 * 8 + 3 * 4 + 3 * 4);
  for (const void* p :
       {static_cast<const void*>(d.labels().data()), static_cast<const void*>(d.offsets().data()),
        static_cast<const void*>(d.indices().data()), static_cast<const void*>(d.values().data())})
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
  // A broken CSR structure is a caller's bug: an invariant, with both values.
  std::vector<std::uint32_t> bad = {1, 5, 0};
  CHECK_THROWS_AS(Dataset::sparse(labels, offsets, bad, values, 5, "mem"), Error);

  Dataset dense = Dataset::dense(labels, std::vector<float>{1, 2, 3, 4, 5, 6}, 2, "mem");
  CHECK(dense.nnz() == 6);
  CHECK(dense.row(2).value[1] == 6);
  CHECK(dense.offsets().empty());
  CHECK(dense.bytes() == 3 * 4 + 6 * 4);

  DatasetStats st = describe(d);
  CHECK(st.rows == 3);
  CHECK(st.label_counts == std::vector<std::pair<float, std::size_t>>{{0.0f, 1}, {1.0f, 2}});
  CHECK_FALSE(st.many_labels);
}

TEST_CASE("Dataset::dense_u8 keeps a byte a value, read as byte / 255") {
  const Dataset d = all_bytes();
  CHECK(d.layout() == Layout::dense_u8);
  CHECK(std::string(to_string(d.layout())) == "dense-u8");
  CHECK(d.dense());
  CHECK(d.rows() == 4);
  CHECK(d.cols() == 64);
  CHECK(d.nnz() == 256);
  CHECK(d.source() == "bytes");
  CHECK(d.label(3) == 3.0f);
  CHECK(d.values().empty());
  CHECK(d.offsets().empty());
  CHECK(d.indices().empty());
  REQUIRE(d.pixels().size() == 256);
  CHECK(reinterpret_cast<std::uintptr_t>(d.pixels().data()) % 64 == 0);
  CHECK(d.bytes() == 4 * 4 + 256);
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const RowView x = d.row(r);
    CHECK(x.dense());
    CHECK(x.value == nullptr);
    CHECK(x.nnz == 64);
    CHECK(x.bytes == d.pixels().data() + r * 64);
    for (std::uint32_t j = 0; j < x.nnz; ++j) {
      CHECK(x.bytes[j] == r * 64 + j);
      CHECK(x.at(j) == static_cast<float>(r * 64 + j) / 255.0f);
    }
  }
  // rows * cols pixels, or it is the caller's bug.
  CHECK_THROWS_AS(Dataset::dense_u8(std::vector<float>{1}, std::vector<std::uint8_t>(3), 2, "m"),
                  Error);
}

TEST_CASE("widened() makes floats of exactly byte / 255.0f; other layouts come back as they are") {
  const Dataset d = all_bytes();
  const Dataset w = d.widened();
  CHECK(w.layout() == Layout::dense);
  CHECK(w.rows() == d.rows());
  CHECK(w.cols() == d.cols());
  CHECK(w.source() == d.source());
  CHECK(std::equal(w.labels().begin(), w.labels().end(), d.labels().begin(), d.labels().end()));
  CHECK(w.pixels().empty());
  REQUIRE(w.values().size() == 256);
  for (int b = 0; b < 256; ++b) {
    const float v = static_cast<float>(b) / 255.0f;  // as IDX images were read as floats
    CHECK(std::memcmp(&w.values()[static_cast<std::size_t>(b)], &v, sizeof v) == 0);
    CHECK(byte_value(static_cast<std::uint8_t>(b)) == v);
  }
  CHECK(w.values().front() == 0.0f);
  CHECK(w.values().back() == 1.0f);
  CHECK(w.row(2).value[5] == d.row(2).at(5));

  const Dataset s = small_sparse();
  const Dataset s2 = s.widened();
  CHECK(s2.values().data() == s.values().data());  // the same arrays, not a copy
  CHECK(same(s, s2));
  CHECK(Dataset{}.widened().empty());
  CHECK(Dataset::dense_u8({}, {}, 5, "none").widened().empty());
}

TEST_CASE("sparse, dense and empty datasets round-trip through the cache") {
  test::TempDir dir;
  Dataset sparse = small_sparse();
  write_cache(sparse, dir.file("s.cache"));
  CHECK(detect_format(dir.file("s.cache")) == FileFormat::cache);
  Dataset s2 = open_cache(dir.file("s.cache"));
  CHECK(same(sparse, s2));
  CHECK(s2.source() == dir.file("s.cache"));
  CHECK(reinterpret_cast<std::uintptr_t>(s2.indices().data()) % 64 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(s2.values().data()) % 64 == 0);
  CHECK(same(sparse, load_dataset(dir.file("s.cache"))));

  std::vector<float> labels = {3, 1};
  Dataset dense = Dataset::dense(labels, std::vector<float>{0.5f, 0, -1, 1e-30f, 7, 8}, 3, "mem");
  write_cache(dense, dir.file("d.hwd"));
  Dataset d2 = open_cache(dir.file("d.hwd"));
  CHECK(d2.layout() == Layout::dense);
  CHECK(same(dense, d2));
  CHECK(d2.row(1).value[0] == 1e-30f);

  Dataset bytes = all_bytes();
  write_cache(bytes, dir.file("b.cache"));
  Dataset b2 = open_cache(dir.file("b.cache"));
  CHECK(b2.layout() == Layout::dense_u8);
  CHECK(same(bytes, b2));
  CHECK(b2.row(3).at(63) == 1.0f);
  CHECK(reinterpret_cast<std::uintptr_t>(b2.pixels().data()) % 64 == 0);
  const Header bh = CacheBytes(dir.file("b.cache")).header();
  CHECK(bh.layout == 3);
  CHECK(bh.nnz == 256);
  CHECK(bh.file_size == bh.values_offset + 256 + 32);  // a byte a value, then the checksums
  CHECK(same(bytes, load_dataset(dir.file("b.cache"))));

  write_cache(Dataset::sparse({}, std::vector<std::uint64_t>{0}, {}, {}, 0, "none"),
              dir.file("e.cache"));
  CHECK(open_cache(dir.file("e.cache")).empty());
  write_cache(Dataset{}, dir.file("default.cache"));
  CHECK(open_cache(dir.file("default.cache")).empty());

  // Written under a temporary name and renamed: nothing else is left in the folder.
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) {
    CHECK(e.path().string().find(".tmp.") == std::string::npos);
    ++files;
  }
  CHECK(files == 5);
  std::string msg = error_of<IoError>([&] { write_cache(sparse, dir.file("no/such/dir.cache")); });
  CHECK_MESSAGE(contains(msg, "cannot create " + dir.file("no/such/dir.cache")), msg);
}

TEST_CASE("damaged caches are rejected, each with a message naming the damage") {
  test::TempDir dir;
  Dataset d = small_sparse();
  const std::string path = dir.file("good.cache"), bad = dir.file("bad.cache");
  write_cache(d, path);
  const Header h = CacheBytes(path).header();
  CHECK(h.file_size == std::filesystem::file_size(path));
  CHECK(h.nnz == d.nnz());

  SUBCASE("bad magic") {
    CacheBytes c(path);
    c.bytes()[0] = 'X';
    CHECK(contains(c.open_error(bad), "not a hogwild cache (bad magic)"));
    test::write_text(bad, "1 1:1\n");
    CHECK(
        contains(error_of<DataError>([&] { open_cache(bad); }), "not a hogwild cache (bad magic)"));
  }
  SUBCASE("another format version") {
    CacheBytes c(path);
    Header x = h;
    x.version = 7;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "format version 7, this build reads 1 and 2"));
  }
  SUBCASE("a flipped bit that leaves every row valid: the section is named") {
    // A label's sign bit: the label counts changed (711/1289 to 710/1290), silently.
    for (const auto& [section, offset] : {std::pair{"labels", h.labels_offset + 3},
                                          std::pair{"values", h.values_offset + 2}}) {
      const std::string where = section;  // (clang 14 captures no structured binding)
      CAPTURE(where);
      CacheBytes c(path);
      c.bytes()[offset] = static_cast<char>(c.bytes()[offset] ^ (offset == h.labels_offset + 3 ? 0x80 : 0x01));
      CHECK(contains(c.open_error(bad), std::string("the ") + section +
                                            " section does not match its checksum"));
    }
    CacheBytes c(path);
    c.bytes()[c.bytes().size() - 5] ^= 1;  // the trailer itself
    CHECK(contains(c.open_error(bad), "the trailer of section checksums is corrupt"));
  }
  SUBCASE("a version 1 cache (no checksums' trailer) still loads") {
    CacheBytes c(path);
    Header x = h;
    x.version = 1;
    x.file_size -= 32;
    c.set_header(x);
    c.bytes().resize(c.bytes().size() - 32);
    test::write_text(bad, c.bytes());
    CHECK(same(d, open_cache(bad)));
  }
  SUBCASE("a header changed behind the checksum") {
    CacheBytes c(path);
    Header x = h;
    x.rows -= 1;
    c.set_header(x, false);
    CHECK(contains(c.open_error(bad), "header checksum mismatch"));
  }
  SUBCASE("truncated file") {
    CacheBytes c(path);
    c.bytes().resize(1000);
    CHECK(contains(c.open_error(bad), "truncated: header says " + std::to_string(h.file_size) +
                                          " bytes, file has 1000"));
    c.bytes().resize(40);
    CHECK(contains(c.open_error(bad),
                   "truncated: the file has 40 bytes, less than the 88-byte header"));
  }
  SUBCASE("trailing bytes") {
    CacheBytes c(path);
    c.bytes() += "extra";
    CHECK(contains(c.open_error(bad), "(trailing bytes)"));
  }
  SUBCASE("a section outside the file or misaligned") {
    CacheBytes c(path);
    Header x = h;
    x.values_offset = h.file_size;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "values section (offset"));
    x = h;
    x.indices_offset += 4;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "indices section"));
  }
  SUBCASE("an index >= cols") {
    CacheBytes c(path);
    c.poke<std::uint32_t>(h.indices_offset + 4 * (h.nnz - 1), static_cast<std::uint32_t>(h.cols));
    CHECK(contains(c.open_error(bad), "row 500: feature index 300 >= cols 300"));
  }
  SUBCASE("unsorted indices") {
    CacheBytes c(path);
    c.poke<std::uint32_t>(h.indices_offset + 4, 0);  // row 1: second index not above the first
    CHECK(contains(c.open_error(bad), "row 1: feature indices not strictly ascending"));
  }
  SUBCASE("non-monotonic offsets") {
    CacheBytes c(path);
    c.poke<std::uint64_t>(h.offsets_offset + 8 * 3, 100000);
    CHECK(contains(c.open_error(bad), "row 3: CSR offsets are not monotonic"));
    CacheBytes c2(path);
    c2.poke<std::uint64_t>(h.offsets_offset + 8 * h.rows, h.nnz - 1);
    CHECK(contains(c2.open_error(bad), "CSR offsets must run from 0 to nnz 3500"));
  }
  SUBCASE("a label or value that is not finite") {
    CacheBytes c(path);
    c.poke<float>(h.labels_offset + 4 * 10, std::numeric_limits<float>::quiet_NaN());
    CHECK(contains(c.open_error(bad), "row 11: label is not finite"));
    CacheBytes c2(path);
    c2.poke<float>(h.values_offset, std::numeric_limits<float>::infinity());
    CHECK(contains(c2.open_error(bad), "row 1: a value is not finite"));
  }
  SUBCASE("a dense shape that does not match") {
    Dataset dense =
        Dataset::dense(std::vector<float>{1, 2}, std::vector<float>{1, 2, 3, 4}, 2, "m");
    write_cache(dense, dir.file("dense.cache"));
    CacheBytes c(dir.file("dense.cache"));
    Header x = c.header();
    x.cols = 3;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "dense shape 2x3 does not match 4 values"));
  }
  SUBCASE("a gzip'ed cache") {
    test::write_gzip(bad, test::read_text(path));
    CHECK(detect_format(bad) == FileFormat::cache);
    CHECK(contains(error_of<DataError>([&] { load_dataset(bad); }), "gunzip it first"));
    std::string msg = error_of<DataError>([&] { open_cache(bad); });
    CHECK_MESSAGE(contains(msg, "not a hogwild cache (bad magic); it is gzip'ed"), msg);
  }
}

TEST_CASE("damaged dense_u8 caches are rejected with a clear error, never a crash") {
  test::TempDir dir;
  const std::string path = dir.file("u8.cache"), bad = dir.file("bad.cache");
  write_cache(all_bytes(), path);
  const Header h = CacheBytes(path).header();

  SUBCASE("truncated anywhere") {
    const std::string bytes = test::read_text(path);
    for (std::size_t n = 0; n < bytes.size(); ++n)
      CHECK_THROWS_AS(parse_cache(std::string_view(bytes).substr(0, n), "u8.cache"), DataError);
    CacheBytes c(path);
    c.bytes().pop_back();
    CHECK(contains(c.open_error(bad), "truncated: header says " + std::to_string(h.file_size) +
                                          " bytes, file has " + std::to_string(h.file_size - 1)));
  }
  SUBCASE("a header that lies about the sizes") {
    CacheBytes c(path);
    Header x = h;
    x.rows = 5;  // 5 x 64 pixels do not fit where 4 x 64 did
    x.nnz = 5 * 64;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "values section (offset " + std::to_string(h.values_offset) +
                                          ", 320 bytes)"));
    x = h;
    x.cols = 63;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "dense shape 4x63 does not match 256 values"));
    x = h;
    x.values_offset = h.labels_offset + 8;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "values section"));
  }
  SUBCASE("read as floats (layout 1), the values would run past the file") {
    CacheBytes c(path);
    Header x = h;
    x.layout = 1;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "values section (offset " + std::to_string(h.values_offset) +
                                          ", 1024 bytes)"));
  }
  SUBCASE("a layout this build does not know") {
    CacheBytes c(path);
    Header x = h;
    x.layout = 4;
    c.set_header(x);
    CHECK(contains(c.open_error(bad), "unknown layout 4"));
  }
  SUBCASE("a label that is not finite") {
    CacheBytes c(path);
    c.poke<float>(h.labels_offset + 4 * 2, std::numeric_limits<float>::infinity());
    CHECK(contains(c.open_error(bad), "row 3: label is not finite"));
  }
}

TEST_CASE("a large cache is validated in parallel, and TBB's threads are gone after") {
  GenerateOptions o;
  o.rows = 220000;
  o.features = 100000;
  o.nnz_per_row = 20;  // 4.4M non-zeros: above the parallel threshold
  Dataset d = generate_sparse(o);
  test::TempDir dir;
  write_cache(d, dir.file("big.cache"));
  CHECK(same(d, open_cache(dir.file("big.cache"))));
  CHECK(thread_count() == kThreadsAtStart);

  CacheBytes c(dir.file("big.cache"));
  const Header h = c.header();
  // Damage two rows: the message names the first, whichever thread found which.
  c.poke<std::uint32_t>(h.indices_offset + 4 * (h.nnz - 1), 100000);
  c.poke<std::uint32_t>(h.indices_offset + 4 * (150000 * 20 + 3), 100001);
  CHECK(contains(c.open_error(dir.file("bad.cache")),
                 "row 150001: feature index 100001 >= cols 100000"));
  CHECK(thread_count() == kThreadsAtStart);
}
