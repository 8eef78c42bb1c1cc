// Sparse or dense rows for the same data (src/data/storage.cpp): densified and
// sparsified, load_dataset's --storage choice and its density threshold, a test set
// stored like its training set, and hogwild_data convert --storage.
#include <doctest/doctest.h>

#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

// Three rows of 4 columns: {1:a 3:b}, {}, {0:c}.
Dataset three_rows(float a, float b, float c) {
  std::vector<float> labels{1, 0, 1};
  std::vector<std::uint64_t> offsets{0, 2, 2, 3};
  std::vector<std::uint32_t> indices{1, 3, 0};
  std::vector<float> values{a, b, c};
  return Dataset::sparse(labels, offsets, indices, values, 4, "mem");
}

std::vector<float> cells(const Dataset& d) {
  std::vector<float> out;
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const RowView x = d.row(r);
    for (std::uint32_t j = 0; j < x.nnz; ++j) out.push_back(x.at(j));
  }
  return out;
}

const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("densified: floats, zero rows, padding and cutting columns") {
  const Dataset d = three_rows(0.5f, -2.0f, 3.0f).densified(4);
  CHECK(d.layout() == Layout::dense);
  CHECK(d.rows() == 3);
  CHECK(d.cols() == 4);
  CHECK(d.source() == "mem");
  CHECK(d.labels()[2] == 1.0f);
  CHECK(cells(d) == std::vector<float>{0, 0.5f, 0, -2, 0, 0, 0, 0, 3, 0, 0, 0});

  const Dataset wide = three_rows(0.5f, -2.0f, 3.0f).densified(6);
  CHECK(wide.cols() == 6);
  CHECK(wide.row(0).value[3] == -2.0f);
  CHECK(wide.row(0).value[5] == 0.0f);
  const Dataset narrow = three_rows(0.5f, -2.0f, 3.0f).densified(2);  // column 3 dropped
  CHECK(cells(narrow) == std::vector<float>{0, 0.5f, 0, 0, 3, 0});

  // A dense set keeps its kind; the same width is the same storage.
  CHECK(cells(narrow.densified(3)) == std::vector<float>{0, 0.5f, 0, 0, 0, 0, 3, 0, 0});
  CHECK(d.densified(4).values().data() == d.values().data());

  // Ratings have no dense form.
  const Dataset r = Dataset::ratings(std::vector<float>{4}, std::vector<std::uint32_t>{1},
                                     std::vector<std::uint32_t>{2}, "r");
  CHECK_THROWS_AS(r.densified(3), ConfigError);
}

TEST_CASE("densified: values k/255 become bytes that read exactly byte_value(k)") {
  // 3/255 as LIBSVM's "%g" prints it (6 significant digits), 1 and 128/255 exactly.
  const Dataset d = three_rows(0.0117647f, 1.0f, 128.0f / 255.0f).densified(4);
  REQUIRE(d.layout() == Layout::dense_u8);
  CHECK(d.row(0).bytes[1] == 3);
  CHECK(d.row(0).at(1) == byte_value(3));
  CHECK(d.row(0).bytes[3] == 255);
  CHECK(d.row(2).bytes[0] == 128);
  CHECK(d.pixels().size() == 12);
  for (std::uint32_t j = 0; j < 4; ++j) CHECK(d.row(1).bytes[j] == 0);
  CHECK(d.densified(5).layout() == Layout::dense_u8);

  // One value that is not some k/255 at the precision it shows (0.01175: 3/255 is
  // 0.0117647, 1.5e-5 away, and five decimals allow 5e-6) keeps every value a float.
  const Dataset f = three_rows(0.01175f, 1.0f, 128.0f / 255.0f).densified(4);
  CHECK(f.layout() == Layout::dense);
  CHECK(f.row(0).value[1] == 0.01175f);
  CHECK(three_rows(0.5f, 1.0f, 2.0f).densified(4).layout() == Layout::dense);   // above 1
  CHECK(three_rows(0.5f, 1.0f, 0.0f).densified(4).layout() == Layout::dense);   // 127.5/255
  CHECK(three_rows(1e-9f, 1.0f, 0.0f).densified(4).layout() == Layout::dense);  // not 0/255
}

TEST_CASE("densified: pixels written with a fixed number of decimals are bytes too") {
  // 3/255, 128/255 and 254/255 as "%.3f", "%.4f" and "%.5f" write them: the byte each
  // is nearest to, within half a unit of the last decimal shown.
  for (const auto& [three, half, top] : {std::tuple{0.012f, 0.502f, 0.996f},
                                         std::tuple{0.0118f, 0.502f, 0.9961f},
                                         std::tuple{0.01176f, 0.50196f, 0.99608f}}) {
    const float first = three;  // (clang 14 captures no structured binding)
    CAPTURE(first);
    const Dataset d = three_rows(three, half, top).densified(4);
    REQUIRE(d.layout() == Layout::dense_u8);
    CHECK(d.row(0).bytes[1] == 3);
    CHECK(d.row(0).bytes[3] == 128);
    CHECK(d.row(2).bytes[0] == 254);
  }
  // Not bytes: 0.123 is 0.0014 from 31/255 (three decimals allow 0.0005); 0.5 and
  // 0.25 fall between two bytes whatever their decimals.
  CHECK(three_rows(0.123f, 1.0f, 0.0f).densified(4).layout() == Layout::dense);
  CHECK(three_rows(0.25f, 1.0f, 0.0f).densified(4).layout() == Layout::dense);
  // Nor values all written with two decimals or fewer: 0.02 is 5/255 within 5e-4,
  // but a set at that precision may as well hold other numbers.
  CHECK(three_rows(0.02f, 0.2f, 0.98f).densified(4).layout() == Layout::dense);
  // With one value showing three decimals the set is at that precision: 0.02 is
  // "%.3f"'s 0.020, 5/255.
  CHECK(three_rows(0.02f, 0.012f, 0.98f).densified(4).layout() == Layout::dense_u8);
  // The libsvm text of an IDX image written with "%.3f" loads as the same bytes.
  std::string text;
  const std::uint8_t pixels[] = {0, 3, 77, 128, 200, 254, 255, 1};
  text += "7";
  for (std::size_t j = 0; j < 8; ++j)
    if (pixels[j]) text += fmt::format(" {}:{:.3f}", j + 1, pixels[j] / 255.0);
  text += "\n";
  const Dataset loaded = parse_libsvm(text, "pixels.svm").densified(8);
  REQUIRE(loaded.layout() == Layout::dense_u8);
  for (std::size_t j = 0; j < 8; ++j) CHECK(loaded.row(0).bytes[j] == pixels[j]);
}

TEST_CASE("sparsified keeps the non-zeros; stored_like follows the training set") {
  const Dataset dense = three_rows(0.5f, -2.0f, 3.0f).densified(4);
  const Dataset s = dense.sparsified();
  CHECK(s.layout() == Layout::sparse);
  CHECK(s.cols() == 4);
  CHECK(s.nnz() == 3);
  CHECK(cells(s) == std::vector<float>{0.5f, -2.0f, 3.0f});
  CHECK(s.row(0).index[1] == 3);
  CHECK(s.row(1).nnz == 0);

  const Dataset bytes = three_rows(0.0117647f, 1.0f, 0.2f).densified(4);
  REQUIRE(bytes.layout() == Layout::dense_u8);
  CHECK(cells(bytes.sparsified()) == std::vector<float>{byte_value(3), 1.0f, byte_value(51)});

  const Dataset sparse_test = three_rows(0.25f, 0.5f, 0.75f);
  const Dataset wide_train = three_rows(1, 1, 1).densified(6);
  const Dataset t = stored_like(sparse_test, wide_train);
  CHECK(t.layout() == Layout::dense);
  CHECK(t.cols() == 6);
  CHECK(stored_like(wide_train, sparse_test).layout() == Layout::sparse);
  CHECK(stored_like(sparse_test, sparse_test).indices().data() == sparse_test.indices().data());
}

TEST_CASE("--storage: parsing, and the density threshold on both sides") {
  CHECK(parse_storage("auto") == Storage::automatic);
  CHECK(parse_storage("sparse") == Storage::sparse);
  CHECK(parse_storage("dense") == Storage::dense);
  for (const char* bad : {"", "Dense", "bytes", "auto "}) {
    INFO(std::string(bad));
    CHECK_THROWS_WITH_AS(parse_storage(bad),
                         doctest::Contains("--storage expects auto, sparse or dense"), ConfigError);
  }
  CHECK(std::string(to_string(Storage::automatic)) == "auto");

  // 3 non-zeros in 3 x 4 cells: density 0.25.
  const Dataset d = three_rows(0.5f, 0.5f, 0.5f);
  CHECK(density(d) == doctest::Approx(0.25));
  CHECK(stores_dense(d, Storage::automatic, 0.25));
  CHECK_FALSE(stores_dense(d, Storage::automatic, 0.26));
  CHECK_FALSE(stores_dense(d, Storage::sparse, 0.0));
  CHECK(stores_dense(d, Storage::dense, 1.0));
  CHECK_FALSE(stores_dense(d.densified(4), Storage::dense));  // already dense
  // The default threshold, each side of it.
  const double t = kDenseDensity;
  CHECK(stores_dense(d, Storage::automatic, t) == (0.25 >= t));
  test::TempDir dir;
  std::string above, below;
  for (int r = 0; r < 100; ++r) {  // 8 columns; rows of 8 and of 1 non-zero
    above += "1 1:0.5 2:0.5 3:0.5 4:0.5 5:0.5 6:0.5 7:0.5 8:0.5\n";
    below += "1 8:0.5\n";
  }
  test::write_text(dir.file("above.svm"), above);
  test::write_text(dir.file("below.svm"), below);
  CHECK(load_dataset(dir.file("above.svm")).layout() == Layout::dense);
  CHECK(load_dataset(dir.file("below.svm")).layout() == Layout::sparse);  // density 1/8
  CHECK(load_dataset(dir.file("above.svm"), "", {0, Storage::sparse}).layout() == Layout::sparse);
  CHECK(load_dataset(dir.file("below.svm"), "", {0, Storage::dense}).layout() == Layout::dense);
  CHECK(load_dataset(dir.file("above.svm"), "", {0, Storage::automatic, kInf}).layout() ==
        Layout::sparse);
}

TEST_CASE("hogwild_data convert --storage writes the cache in that layout") {
  test::TempDir dir;
  std::string text;
  for (int r = 0; r < 50; ++r)  // pixels k/255 as "%g" prints them, a third of the cells
    text += fmt::format("{} 1:0.0117647 {}:1 6:0.501961\n", r % 3, 2 + r % 4);
  test::write_text(dir.file("px.svm"), text);
  const Dataset sparse = load_dataset(dir.file("px.svm"), "", {0, Storage::sparse});
  for (const char* storage : {"dense", "sparse", "auto"}) {
    INFO(std::string(storage));
    const std::string out = dir.file(std::string(storage) + ".cache");
    auto r = test::run({test::hogwild_data_path(), "convert", dir.file("px.svm"), "--out", out,
                        "--storage", storage});
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(std::string(storage) == "sparse" ? "binary cache, sparse"
                                                       : "binary cache, dense-u8") !=
          std::string::npos);
    const Dataset c = open_cache(out);
    if (std::string(storage) == "sparse") {
      CHECK(c.layout() == Layout::sparse);
      CHECK(cells(c) == cells(sparse));
      continue;
    }
    REQUIRE(c.layout() == Layout::dense_u8);  // density 0.5, every value k/255
    CHECK(c.cols() == 6);
    CHECK(cells(c) == cells(sparse.densified(6)));
    CHECK(c.row(0).bytes[0] == 3);
    CHECK(c.row(0).bytes[5] == 128);
    // Back through libsvm text: the same bytes.
    const std::string svm = dir.file(std::string(storage) + ".svm");
    REQUIRE(test::run({test::hogwild_data_path(), "convert", out, "--out", svm, "--format",
                       "libsvm"}).exit_code == 0);
    CHECK(cells(load_dataset(svm, "", {0, Storage::dense})) == cells(c));
  }
  auto bad = test::run({test::hogwild_data_path(), "convert", dir.file("px.svm"), "--out",
                        dir.file("x.cache"), "--storage", "packed"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("--storage expects auto, sparse or dense, got \"packed\"") != std::string::npos);
}
