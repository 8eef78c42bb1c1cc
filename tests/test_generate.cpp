// Synthetic data: determinism, shape, Zipf popularity, label noise, libsvm output
// (dense_u8 sets too), and the hogwild_data CLI (generate, convert, info, option errors).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

bool same(const Dataset& a, const Dataset& b) {
  auto eq = [](auto x, auto y) { return std::equal(x.begin(), x.end(), y.begin(), y.end()); };
  return a.layout() == b.layout() && a.rows() == b.rows() && a.cols() == b.cols() &&
         a.nnz() == b.nnz() && eq(a.labels(), b.labels()) && eq(a.offsets(), b.offsets()) &&
         eq(a.indices(), b.indices()) && eq(a.values(), b.values()) && eq(a.pixels(), b.pixels());
}

GenerateOptions opts(std::size_t rows, std::size_t features, std::size_t k,
                     std::uint64_t seed = 1) {
  GenerateOptions o;
  o.rows = rows;
  o.features = features;
  o.nnz_per_row = k;
  o.seed = seed;
  return o;
}

// Rows in which each feature appears, sorted ascending.
std::vector<std::size_t> sorted_popularity(const Dataset& d) {
  std::vector<std::size_t> n(d.cols());
  for (std::uint32_t j : d.indices()) ++n[j];
  std::sort(n.begin(), n.end());
  return n;
}

double fraction_of_ones(const Dataset& d) {
  return static_cast<double>(std::count(d.labels().begin(), d.labels().end(), 1.0f)) /
         static_cast<double>(d.rows());
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// An IDX file: magic {0, 0, 0x08, dims.size()}, big-endian dims, then `data`.
std::string idx_bytes(const std::vector<std::uint32_t>& dims, const std::string& data) {
  std::string s = {'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((d >> shift) & 0xff);
  return s + data;
}

test::RunResult data_cli(std::vector<std::string> args) {
  args.insert(args.begin(), test::hogwild_data_path());
  return test::run(args, 120);
}

}  // namespace

TEST_CASE("same seed, same data; another seed, other data") {
  GenerateOptions o = opts(2000, 500, 12, 42);
  Dataset a = generate_sparse(o), b = generate_sparse(o);
  CHECK(same(a, b));
  o.seed = 43;
  Dataset c = generate_sparse(o);
  CHECK_FALSE(std::equal(a.indices().begin(), a.indices().end(), c.indices().begin()));
  CHECK_FALSE(std::equal(a.labels().begin(), a.labels().end(), c.labels().begin()));
  // The stream is fixed row by row: fewer rows give a prefix of the same data.
  Dataset prefix = generate_sparse(opts(1000, 500, 12, 42));
  CHECK(std::equal(prefix.indices().begin(), prefix.indices().end(), a.indices().begin()));
  CHECK(std::equal(prefix.labels().begin(), prefix.labels().end(), a.labels().begin()));
}

TEST_CASE("shape: k distinct ascending features per row, L2-normalised, 0/1 labels") {
  Dataset d = generate_sparse(opts(3000, 400, 25));
  CHECK(d.rows() == 3000);
  CHECK(d.cols() == 400);
  CHECK(d.nnz() == 3000 * 25);
  std::size_t bad_rows = 0;
  for (std::size_t r = 0; r < d.rows(); ++r) {
    RowView row = d.row(r);
    bool ok = row.nnz == 25 && (d.label(r) == 0.0f || d.label(r) == 1.0f);
    double norm = 0;
    for (std::uint32_t i = 0; i < row.nnz; ++i) {
      ok &= row.index[i] < 400 && (i == 0 || row.index[i] > row.index[i - 1]);
      norm += static_cast<double>(row.value[i]) * row.value[i];
    }
    ok &= std::fabs(norm - 1.0) < 1e-6;
    bad_rows += !ok;
  }
  CHECK(bad_rows == 0);
  const double ones = fraction_of_ones(d);
  CHECK(ones > 0.2);
  CHECK(ones < 0.8);
}

TEST_CASE("Zipf popularity: a few hot features, a long tail; exponent 0 is uniform") {
  GenerateOptions o = opts(20000, 2000, 10);
  o.zipf_exponent = 1.0;
  auto pop = sorted_popularity(generate_sparse(o));
  const std::size_t median = pop[pop.size() / 2], top = pop.back();
  CAPTURE(median);
  CAPTURE(top);
  CHECK(top > 20 * std::max<std::size_t>(median, 1));
  CHECK(top > 20000 / 10);  // the hottest feature is in more than a tenth of the rows

  o.zipf_exponent = 0.0;
  pop = sorted_popularity(generate_sparse(o));
  CHECK(pop.back() < 2 * pop[pop.size() / 2]);
}

TEST_CASE("steep popularity and dense rows still give distinct features") {
  GenerateOptions o = opts(300, 50, 45);
  o.zipf_exponent = 3.0;  // rejection sampling alone would stall on the tail
  Dataset d = generate_sparse(o);
  for (std::size_t r = 0; r < d.rows(); ++r) {
    RowView row = d.row(r);
    REQUIRE(row.nnz == 45);
    for (std::uint32_t i = 1; i < row.nnz; ++i) REQUIRE(row.index[i] > row.index[i - 1]);
  }
  Dataset full = generate_sparse(opts(10, 30, 30));  // every feature in every row
  for (std::size_t r = 0; r < full.rows(); ++r) CHECK(full.row(r).index[29] == 29);
}

TEST_CASE("noise flips that fraction of labels and nothing else") {
  GenerateOptions o = opts(40000, 1000, 10, 5);
  o.noise = 0.0;
  Dataset clean = generate_sparse(o);
  o.noise = 0.1;
  Dataset noisy = generate_sparse(o);
  CHECK(std::equal(clean.indices().begin(), clean.indices().end(), noisy.indices().begin()));
  std::size_t flipped = 0;
  for (std::size_t r = 0; r < clean.rows(); ++r) flipped += clean.label(r) != noisy.label(r);
  CHECK(static_cast<double>(flipped) / 40000.0 == doctest::Approx(0.1).epsilon(0.15));
}

TEST_CASE("invalid options are ConfigErrors") {
  CHECK_THROWS_AS(generate_sparse(opts(0, 10, 2)), ConfigError);
  CHECK_THROWS_AS(generate_sparse(opts(10, 0, 1)), ConfigError);
  CHECK_THROWS_AS(generate_sparse(opts(10, 10, 11)), ConfigError);
  CHECK_THROWS_AS(generate_sparse(opts(10, 10, 0)), ConfigError);
  GenerateOptions o = opts(10, 10, 2);
  o.noise = 0.6;
  CHECK_THROWS_AS(generate_sparse(o), ConfigError);
  o.noise = 0.1;
  o.zipf_exponent = -1;
  CHECK_THROWS_AS(generate_sparse(o), ConfigError);
}

TEST_CASE("generated data round-trips through libsvm text, plain and gzip") {
  test::TempDir dir;
  Dataset d = generate_sparse(opts(1500, 700, 9));
  write_libsvm(d, dir.file("g.svm"));
  write_libsvm(d, dir.file("g.svm.gz"));
  CHECK(same(d, read_libsvm(dir.file("g.svm"))));
  CHECK(same(d, read_libsvm(dir.file("g.svm.gz"))));
  CHECK(test::read_text(dir.file("g.svm.gz")).rfind("\x1f\x8b", 0) == 0);
  const std::string text = test::read_text(dir.file("g.svm"));
  CHECK((text.rfind("0 ", 0) == 0 || text.rfind("1 ", 0) == 0));  // integral labels as integers
  CHECK(contains(text, ":0.33333334"));                           // 1/sqrt(9), shortest form
}

TEST_CASE("write_libsvm of a dense_u8 set writes what its widened() floats write") {
  test::TempDir dir;
  std::vector<std::uint8_t> pixels(256);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(255 - i);
  const Dataset d = Dataset::dense_u8(std::vector<float>{0, 1, 2, 9}, pixels, 64, "bytes");
  write_libsvm(d, dir.file("u8.svm"));
  write_libsvm(d.widened(), dir.file("f.svm"));
  const std::string text = test::read_text(dir.file("u8.svm"));
  CHECK(text == test::read_text(dir.file("f.svm")));
  CHECK(text.rfind("0 1:1 2:0.99607843 ", 0) == 0);
  CHECK(contains(text, " 64:0.7529412\n1 "));  // 192 / 255
  CHECK(contains(text, " 63:0.003921569\n"));   // 1 / 255; the zero pixel is left out
  CHECK(same(read_libsvm(dir.file("u8.svm")), read_libsvm(dir.file("f.svm"))));
}

TEST_CASE("hogwild_data: IDX images convert to a dense_u8 cache and to libsvm as byte / 255") {
  REQUIRE(std::filesystem::exists(test::hogwild_data_path()));
  test::TempDir dir;
  const std::string images = dir.file("small-images-idx3-ubyte");
  test::write_text(images, idx_bytes({3, 2, 2}, {'\0', '\x33', '\x7f', '\xff', '\x01', '\x02',
                                                 '\x03', '\x04', '\xff', '\xff', '\0', '\0'}));
  test::write_text(dir.file("small-labels-idx1-ubyte"), idx_bytes({3}, {'\x07', '\0', '\x09'}));
  const Dataset idx = read_idx(images);

  auto r = data_cli({"convert", images, "--out", dir.file("s.cache")});
  CAPTURE(r.out);
  REQUIRE(r.exit_code == 0);
  const Dataset cached = open_cache(dir.file("s.cache"));
  CHECK(cached.layout() == Layout::dense_u8);
  CHECK(same(cached, idx));  // the same labels and pixels: it trains as the IDX files do

  r = data_cli({"convert", images, "--out", dir.file("s.svm"), "--format", "libsvm"});
  REQUIRE(r.exit_code == 0);
  write_libsvm(idx.widened(), dir.file("floats.svm"));
  const std::string text = test::read_text(dir.file("s.svm"));
  CHECK(text == test::read_text(dir.file("floats.svm")));
  CHECK(text == "7 2:0.2 3:0.49803922 4:1\n0 1:0.003921569 2:0.007843138 3:0.011764706 "
                "4:0.015686275\n9 1:1 2:1\n");

  r = data_cli({"info", dir.file("s.cache")});
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "(binary cache, dense-u8)"));
  CHECK(contains(r.out, "non-zeros:  9 (3.00 per row)\n"));  // 3 of the 12 pixels are black
  r = data_cli({"info", images});
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "(IDX, dense-u8)"));
}

TEST_CASE("hogwild_data: --version, generate, convert, info") {
  REQUIRE(std::filesystem::exists(test::hogwild_data_path()));
  test::TempDir dir;

  auto r = data_cli({"--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("hogwild_data ", 0) == 0);

  r = data_cli({"generate", "--rows", "1000", "--features", "200", "--nnz-per-row", "10", "--noise",
                "0.1", "--seed", "7", "--zipf", "1.2", "--out", dir.file("g.svm.gz")});
  CAPTURE(r.out);
  REQUIRE(r.exit_code == 0);
  GenerateOptions o = opts(1000, 200, 10, 7);
  o.noise = 0.1;
  o.zipf_exponent = 1.2;
  const Dataset expected = generate_sparse(o);
  CHECK(same(read_libsvm(dir.file("g.svm.gz")), expected));

  r = data_cli({"generate", "--rows", "1000", "--features", "200", "--nnz-per-row", "10", "--noise",
                "0.1", "--seed", "7", "--zipf", "1.2", "--out", dir.file("g.cache")});
  REQUIRE(r.exit_code == 0);
  CHECK(same(open_cache(dir.file("g.cache")), expected));

  r = data_cli({"convert", dir.file("g.svm.gz"), "--out", dir.file("c.cache")});
  REQUIRE(r.exit_code == 0);
  CHECK(same(open_cache(dir.file("c.cache")), expected));

  r = data_cli({"info", dir.file("c.cache")});
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "binary cache"));
  CHECK(contains(r.out, "rows:       1000\n"));
  CHECK(contains(r.out, "features:   200\n"));
  CHECK(contains(r.out, "non-zeros:  10000 (10.00 per row)\n"));
  CHECK(contains(r.out, "density:    0.05\n"));
  CHECK(contains(r.out, "labels:     2 distinct"));

  r = data_cli({"info", dir.file("g.svm.gz"), "--threads", "1"});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "libsvm text"));
}

TEST_CASE("hogwild_data: bad options exit 2, bad data exit 2 with file:line") {
  test::TempDir dir;
  const std::string out = dir.file("x.svm");
  auto r = data_cli({"generate", "--rows", "-5", "--out", out});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: --rows: expected a whole number of at least 1, got -5"));
  // A subcommand's unsigned option refuses a negative (it wrapped), --threads its range.
  r = data_cli({"generate", "--rows", "10", "--seed", "-1", "--out", out});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: --seed: expected a whole number of 0 or more, got -1"));
  r = data_cli({"info", out, "--threads", "100000"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "--threads: expected 0 (all cores) to 1024, got 100000"));
  r = data_cli({"generate", "--bogus", "--out", out});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out,
                 "hogwild_data: error: The following argument was not expected: --bogus (see --help)"));
  r = data_cli({"generate", "--rows", "10"});  // --out is required
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: --out is required (see --help)"));
  r = data_cli({"generate", "--rows", "10", "--noise", "0.7", "--out", out});
  CHECK(r.exit_code == 2);
  r = data_cli({});  // a subcommand is required
  CHECK(r.exit_code == 2);
  r = data_cli({"generate", "--rows", "10", "--features", "5", "--nnz-per-row", "6", "--out", out});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: --nnz-per-row (6) cannot exceed --features (5)"));
  CHECK_FALSE(std::filesystem::exists(out));

  test::write_text(dir.file("bad.svm"), "1 1:1\n0 2:x\n");
  r = data_cli({"info", dir.file("bad.svm")});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: " + dir.file("bad.svm") +
                            ":2: expected \"index:value\" but found \"2:x\""));
  const std::string text = test::read_text(dir.file("bad.svm"));
  r = data_cli({"convert", dir.file("bad.svm"), "--out", dir.file("bad.svm")});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: --out " + dir.file("bad.svm") + " is the input file"));
  CHECK(test::read_text(dir.file("bad.svm")) == text);
  r = data_cli({"stats", "--train", dir.file("bad.svm"), "--json", dir.file("bad.svm")});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "is the --train file"));
  CHECK(test::read_text(dir.file("bad.svm")) == text);
  r = data_cli({"generate", "--kind", "ratings", "--out", out, "--test-out", out});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "--test-out " + out + " is also the --out file"));
  // A special file is written in place (through a link of the test's, so that a
  // regression replaces the link, not the machine's /dev/stdout).
  std::filesystem::create_symlink("/dev/stdout", dir.file("stdout"));
  r = data_cli({"generate", "--rows", "3", "--features", "5", "--nnz-per-row", "2", "--out",
                dir.file("stdout")});
  CHECK(r.exit_code == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), ':') >= 6);  // 3 rows of 2 index:value pairs
  CHECK(std::filesystem::is_symlink(dir.file("stdout")));
  r = data_cli({"convert", dir.file("bad.svm"), "--out", dir.file("no/such/folder/m.cache")});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: cannot write --out to " + dir.file("no/such/folder/m.cache") +
                            ": no directory " + dir.file("no/such/folder")));
  r = data_cli({"convert", dir.file("missing.svm"), "--out", dir.file("m.cache")});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: cannot open " + dir.file("missing.svm")));
}

TEST_CASE("hogwild_data generate --test-out: test rows from the same hidden model; the training rows unchanged") {
  REQUIRE(std::filesystem::exists(test::hogwild_data_path()));
  test::TempDir dir;
  auto r = data_cli({"generate", "--rows", "3000", "--features", "200", "--seed", "9", "--out",
                     dir.file("alone.svm")});
  REQUIRE(r.exit_code == 0);
  r = data_cli({"generate", "--rows", "3000", "--features", "200", "--seed", "9", "--out",
                dir.file("train.svm"), "--test-out", dir.file("test.svm"), "--test-rows", "1000"});
  CAPTURE(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(test::read_text(dir.file("alone.svm")) == test::read_text(dir.file("train.svm")));
  const Dataset test = read_libsvm(dir.file("test.svm"));
  CHECK(test.rows() == 1000);
  // The same hidden model labels both: a model trained on one predicts the other
  // about as well as its own rows (another seed's "test set" is another problem).
  const Dataset all = generate_sparse({4000, 200, 20, 0.05, 1.0, 9});
  CHECK(read_libsvm(dir.file("train.svm")).labels()[0] == all.labels()[0]);
  CHECK(test.labels()[999] == all.labels()[3999]);
  CHECK(std::equal(test.indices().begin(), test.indices().end(),
                   all.indices().begin() + static_cast<std::ptrdiff_t>(all.offsets()[3000])));
  // Default: a tenth of --rows; --test-rows without sparse rows' kind is refused.
  r = data_cli({"generate", "--rows", "500", "--out", dir.file("a.svm"), "--test-out", dir.file("b.svm")});
  REQUIRE(r.exit_code == 0);
  CHECK(read_libsvm(dir.file("b.svm")).rows() == 50);
  r = data_cli({"generate", "--kind", "ratings", "--out", dir.file("r.tsv"), "--test-rows", "5"});
  CHECK(r.exit_code == kExitBadInput);
}
