// MNIST IDX reader: pixels kept as bytes (dense_u8) with exact widening, gzip, the
// labels file found by name, hostile and truncated headers rejected before any
// allocation, and the real Fashion-MNIST.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

// An IDX file: magic {0, 0, type, dims.size()}, big-endian dims, then `data`.
std::string idx_bytes(const std::vector<std::uint32_t>& dims, const std::string& data,
                      unsigned char type = 0x08) {
  std::string s = {'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((d >> shift) & 0xff);
  return s + data;
}

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

// Three 2x2 images and their labels.
const std::string kPixels = {'\0',   '\x33', '\x7f', '\xff', '\x01', '\x02',
                             '\x03', '\x04', '\xff', '\xff', '\0',   '\0'};
const std::string kLabels = {'\x07', '\0', '\x09'};

}  // namespace

TEST_CASE("images become dense rows of bytes (value byte / 255), labels become floats") {
  test::TempDir dir;
  const std::string images = dir.file("small-images-idx3-ubyte");
  test::write_text(images, idx_bytes({3, 2, 2}, kPixels));
  test::write_text(dir.file("small-labels-idx1-ubyte"), idx_bytes({3}, kLabels));

  CHECK(detect_format(images) == FileFormat::idx);
  Dataset d = read_idx(images);
  CHECK(d.layout() == Layout::dense_u8);
  CHECK(d.rows() == 3);
  CHECK(d.cols() == 4);
  CHECK(d.nnz() == 12);
  CHECK(std::vector<float>(d.labels().begin(), d.labels().end()) == std::vector<float>{7, 0, 9});
  // The pixels as the file has them.
  CHECK(std::string(reinterpret_cast<const char*>(d.pixels().data()), d.pixels().size()) ==
        kPixels);
  CHECK(d.values().empty());
  RowView r0 = d.row(0);
  CHECK(r0.dense());
  CHECK(r0.nnz == 4);
  CHECK(r0.bytes[2] == 0x7f);
  CHECK(r0.at(0) == 0.0f);
  CHECK(r0.at(1) == 51.0f / 255.0f);
  CHECK(r0.at(2) == 127.0f / 255.0f);
  CHECK(r0.at(3) == 1.0f);
  CHECK(d.row(2).at(0) == 1.0f);
  CHECK(d.row(1).at(3) == 4.0f / 255.0f);
  CHECK(d.source() == images);
  CHECK(reinterpret_cast<std::uintptr_t>(d.pixels().data()) % 64 == 0);

  // Widened: the floats IDX images used to be read as.
  Dataset w = d.widened();
  CHECK(w.layout() == Layout::dense);
  CHECK(w.values().size() == 12);
  for (std::size_t i = 0; i < kPixels.size(); ++i)
    CHECK(w.values()[i] == static_cast<float>(static_cast<unsigned char>(kPixels[i])) / 255.0f);
  // Its non-zeros are the pixels that are not black (3 of the 12 are), stored as
  // bytes or as floats; nnz() counts every cell.
  CHECK(nonzeros(d) == 9);
  CHECK(nonzeros(w) == 9);
  // ... and the tools report those (hogwild_data info, hogwild_train's load line).
  const auto info = test::run({test::hogwild_data_path(), "info", images});
  CHECK(info.out.find("non-zeros:  9 (3.00 per row)") != std::string::npos);
  const auto train = test::run({test::hogwild_train_path(), "--train", images, "--model",
                                "softmax", "--epochs", "1"});
  INFO(train.out);
  CHECK(train.out.find("3 rows, 4 features, 9 non-zeros") != std::string::npos);
}

TEST_CASE("gzip is read transparently, on either file, and the labels path is derived") {
  test::TempDir dir;
  const std::string images = dir.file("t10k-images-idx3-ubyte.gz");
  test::write_gzip(images, idx_bytes({3, 2, 2}, kPixels));
  test::write_text(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({3}, kLabels));  // not gz
  Dataset d = read_idx(images);
  CHECK(d.rows() == 3);
  CHECK(d.label(2) == 9.0f);
  Dataset e = load_dataset(images, dir.file("t10k-labels-idx1-ubyte"));
  CHECK(std::equal(d.pixels().begin(), d.pixels().end(), e.pixels().begin(), e.pixels().end()));
  // 2-D images (rows x features) are accepted too.
  test::write_text(dir.file("flat"), idx_bytes({3, 4}, kPixels));
  Dataset f = read_idx(dir.file("flat"), dir.file("t10k-labels-idx1-ubyte"));
  CHECK(f.cols() == 4);
  CHECK(std::equal(d.pixels().begin(), d.pixels().end(), f.pixels().begin(), f.pixels().end()));
}

TEST_CASE("idx_labels_path_for replaces images-idx3 in the file name") {
  CHECK(idx_labels_path_for("data/train-images-idx3-ubyte.gz") ==
        "data/train-labels-idx1-ubyte.gz");
  CHECK(idx_labels_path_for("t10k-images-idx3-ubyte") == "t10k-labels-idx1-ubyte");
  CHECK(idx_labels_path_for("images-idx3/x.idx").empty());  // only the name counts
  CHECK(idx_labels_path_for("pixels.idx").empty());
  CHECK_THROWS_AS(read_idx("pixels.idx"), ConfigError);
}

TEST_CASE("a hostile header is rejected from its sizes, before any allocation") {
  test::TempDir dir;
  // 10^9 images of 28x28 declared in a 100-byte file: must fail at once, not try to
  // allocate 3 TB of floats.
  test::write_text(dir.file("huge"), idx_bytes({1000000000, 28, 28}, std::string(84, 'x')));
  test::write_text(dir.file("labels"), idx_bytes({3}, kLabels));
  auto t0 = std::chrono::steady_clock::now();
  std::string msg = error_of<DataError>([&] { read_idx(dir.file("huge"), dir.file("labels")); });
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  CHECK_MESSAGE(contains(msg, dir.file("huge") +
                                  ": truncated: the header declares 1000000000 images of 28x28"),
                msg);
  CHECK_MESSAGE(contains(msg, "the file has 100 bytes"), msg);

  // Dimensions whose product overflows 64 bits.
  test::write_text(dir.file("overflow"), idx_bytes({0xffffffff, 0xffffffff, 0xffffffff}, ""));
  msg = error_of<DataError>([&] { read_idx(dir.file("overflow"), dir.file("labels")); });
  CHECK_MESSAGE(contains(msg, "more than 2^64"), msg);

  // The same through gzip: the inflated size is what counts.
  test::write_gzip(dir.file("huge.gz"), idx_bytes({1000000000, 28, 28}, std::string(84, 'x')));
  msg = error_of<DataError>([&] { read_idx(dir.file("huge.gz"), dir.file("labels")); });
  CHECK_MESSAGE(contains(msg, "truncated: the header declares 1000000000 images"), msg);
}

TEST_CASE("malformed IDX files give clear errors naming the file") {
  test::TempDir dir;
  const std::string labels = dir.file("labels");
  test::write_text(labels, idx_bytes({3}, kLabels));
  auto images_error = [&](const std::string& bytes) {
    test::write_text(dir.file("images"), bytes);
    std::string msg = error_of<DataError>([&] { read_idx(dir.file("images"), labels); });
    CHECK_MESSAGE(msg.rfind(dir.file("images") + ": ", 0) == 0, msg);
    return msg;
  };
  CHECK(contains(images_error(""), "too short for an IDX header (0 bytes)"));
  CHECK(contains(images_error(std::string("\0\0", 2)), "too short for an IDX header (2 bytes)"));
  CHECK(contains(images_error("P5\n28 28\n"), "not an IDX file"));
  CHECK(contains(images_error(idx_bytes({3, 2, 2}, std::string(48, '\0'), 0x0D)),
                 "IDX element type 0x0D is not supported (only unsigned bytes, 0x08)"));
  CHECK(contains(images_error(idx_bytes({3}, kLabels)),
                 "an IDX image file has 2 or 3 dimensions, this one has 1 (is it a labels file?)"));
  CHECK(contains(images_error(idx_bytes({3, 2, 2}, kPixels).substr(0, 10)),
                 "truncated IDX header: 3 dimensions need 16 bytes, the file has 10"));
  CHECK(contains(
      images_error(idx_bytes({3, 2, 2}, kPixels.substr(0, 11))),
      "truncated: the header declares 3 images of 2x2 (28 bytes) but the file has 27 bytes"));
  CHECK(contains(images_error(idx_bytes({3, 2, 2}, kPixels + "x")),
                 "the header declares 3 images of 2x2 (28 bytes) but the file has 29 bytes"));

  test::write_text(dir.file("images"), idx_bytes({3, 2, 2}, kPixels));
  test::write_text(dir.file("two"), idx_bytes({2}, kLabels.substr(0, 2)));
  std::string msg = error_of<DataError>([&] { read_idx(dir.file("images"), dir.file("two")); });
  CHECK_MESSAGE(
      contains(msg, dir.file("two") + ": has 2 labels but " + dir.file("images") + " has 3 images"),
      msg);
  test::write_text(dir.file("cube"), idx_bytes({3, 1, 1}, kLabels));
  msg = error_of<DataError>([&] { read_idx(dir.file("images"), dir.file("cube")); });
  CHECK_MESSAGE(contains(msg, "an IDX label file has 1 dimension, this one has 3"), msg);
  msg = error_of<IoError>([&] { read_idx(dir.file("images"), dir.file("nope")); });
  CHECK_MESSAGE(contains(msg, "cannot open " + dir.file("nope")), msg);
}

TEST_CASE("Fashion-MNIST: 60000 + 10000 images of 28x28, labels 0..9" * doctest::test_suite("fashion_mnist")) {
  const std::filesystem::path dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz")) {
    test::skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
    return;
  }
  Dataset train = load_dataset((dir / "train-images-idx3-ubyte.gz").string());
  CHECK(train.layout() == Layout::dense_u8);
  CHECK(train.rows() == 60000);
  CHECK(train.cols() == 784);
  DatasetStats st = describe(train);
  REQUIRE(st.label_counts.size() == 10);
  for (std::size_t k = 0; k < 10; ++k) {
    CHECK(st.label_counts[k].first == static_cast<float>(k));
    CHECK(st.label_counts[k].second == 6000);  // the training set is balanced
  }
  auto [lo, hi] = std::minmax_element(train.pixels().begin(), train.pixels().end());
  CHECK(*lo == 0);
  CHECK(*hi == 255);
  CHECK(train.bytes() == 60000 * 4 + 60000 * 784);  // a byte a pixel

  Dataset test_set = read_idx((dir / "t10k-images-idx3-ubyte.gz").string());
  CHECK(test_set.rows() == 10000);
  CHECK(test_set.cols() == 784);
}
