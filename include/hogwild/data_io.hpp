// Readers and writers for the data formats: libsvm/svmlight text, MNIST IDX, rating
// triples (MovieLens-style), and the project's own binary cache (mmap'ed read-only). Gzip is detected by content, not
// by file name. Malformed input throws DataError with file:line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild {

struct LibsvmOptions {
  // Parse with this many TBB threads (0 = all cores). TBB's threads are joined
  // before the reader returns, so the caller may fork afterwards.
  unsigned threads = 0;
};

// libsvm/svmlight text: "label idx:val idx:val ... # comment", 1-based indices,
// optional qid:, CRLF, blank lines, scientific notation, .gz.
Dataset read_libsvm(const std::string& path, const LibsvmOptions& options = {});
// Same, from text already in memory; `name` is used in error messages.
Dataset parse_libsvm(std::string_view text, const std::string& name,
                     const LibsvmOptions& options = {});

// MNIST IDX: an images file (ubyte, 2 or 3 dims; pixels kept as bytes, a
// Layout::dense_u8 set of values byte / 255) and a labels file (ubyte, 1 dim).
// Either may be gzip'ed. The labels path defaults to the images path with
// "images-idx3" replaced by "labels-idx1".
Dataset read_idx(const std::string& images_path, const std::string& labels_path = "");
std::string idx_labels_path_for(const std::string& images_path);
// Same, from the (uncompressed) bytes of both files; `name` is used in messages.
Dataset parse_idx(std::string_view images, std::string_view labels, const std::string& name);
// The same, the labels named `labels_name` in messages (a file, "standard input").
Dataset parse_idx(std::string_view images, std::string_view labels, const std::string& name,
                  const std::string& labels_name);

// Rating triples for matrix factorization, one per line: "user item rating
// [timestamp]" separated by a tab, spaces, a comma or "::" (MovieLens u.data,
// ratings.csv, ratings.dat). An optional header line (a first line whose first
// field is not a number, e.g. "userId,movieId,rating,timestamp") is skipped; blank
// lines and '#' comment lines too. Ids are non-negative integers kept as they are
// (no remapping, so a train and a test file agree), at most kMaxRatingId; the
// timestamp, if present, must be an integer and is ignored. Result: Layout::ratings.
inline constexpr std::uint32_t kMaxRatingId = (1u << 26) - 1;
Dataset read_ratings(const std::string& path);
Dataset parse_ratings(std::string_view text, const std::string& name);
// True when the first data line of `head` reads as a rating triple (or a ratings
// header) and not as libsvm: 3 or 4 numeric fields, no "index:value" token.
bool looks_like_ratings(std::string_view head);
// Writes "user<TAB>item<TAB>rating" lines (.gz: gzip'ed).
void write_ratings(const Dataset& d, const std::string& path);

// The binary cache: a header with magic "HWDSET01", format version and sizes, then
// 64-byte aligned arrays. open_cache mmaps it read-only and validates every offset
// and index before returning.
void write_cache(const Dataset& d, const std::string& path);
Dataset open_cache(const std::string& path);
// Same checks on a cache already in memory (copied into an anonymous mapping).
Dataset parse_cache(std::string_view bytes, const std::string& name);

enum class FileFormat { libsvm, idx, cache, ratings };
// Sniffs the (possibly gzip'ed) content of a file.
FileFormat detect_format(const std::string& path);

// How load_dataset stores rows. `automatic`: a sparse set (libsvm text, a sparse
// cache) becomes dense rows (Dataset::densified: bytes when every value is k/255)
// when its density nnz / (rows * cols) is at least dense_at, and dense files (IDX, a
// dense cache) stay dense. `dense`: every set but ratings as dense rows. `sparse`:
// CSR rows, a dense file's non-zeros too (Dataset::sparsified). Dense rows run the
// models' vector kernels; sparse rows pay per non-zero and take memory in proportion
// to it. Ratings are always stored as they are.
enum class Storage : std::uint8_t { automatic, sparse, dense };
// "auto", "sparse" or "dense"; anything else is a ConfigError naming the choices.
Storage parse_storage(std::string_view text);
const char* to_string(Storage storage) noexcept;
// The density from which dense rows are chosen (bench/suite.py density;
// docs/PERFORMANCE.md, "Sparse or dense rows"): softmax trains faster on dense bytes
// from 0.05 and on dense floats from about 0.1 (at 0.19, MNIST's, bytes run 3.6x the
// sparse rows); the MLP runs the same either way. The linear models step per non-zero
// and win on sparse rows up to 0.2-0.35: hogwild_train uses kDenseDensityLinear for them.
inline constexpr double kDenseDensity = 0.15;
inline constexpr double kDenseDensityLinear = 0.35;
// True when `storage` turns the sparse set `d` into dense rows (false for any
// other layout).
bool stores_dense(const Dataset& d, Storage storage, double dense_at = kDenseDensity) noexcept;
// `d` with its rows stored as `storage` says (what load_dataset does to a file's rows).
Dataset with_storage(const Dataset& d, Storage storage, double dense_at = kDenseDensity);

struct LoadOptions {
  unsigned threads = 0;  // libsvm parser threads (LibsvmOptions::threads)
  Storage storage = Storage::automatic;
  double dense_at = kDenseDensity;
};
// Loads any supported file; for IDX images, `labels_path` names the labels file.
Dataset load_dataset(const std::string& path, const std::string& labels_path = "",
                     const LoadOptions& options = {});

// `d` copied once into a memory file, in the cache format (rows, as checked here,
// without checksums). Worth it for a set trained on many times through the fork
// server (the Python module's hogwild.dataset, a sweep in one program): each run
// hands that file to its workers instead of copying the rows into a new one.
Dataset in_memory_file(const Dataset& d);

// Reads a whole file into memory, inflating gzip transparently.
std::string read_file_maybe_gz(const std::string& path);

// Synthetic sparse binary classification with power-law (Zipf) feature popularity,
// like RCV1 or the KDD Cup sets: a hidden weight vector labels each row through a
// logistic link, `noise` flips that fraction of labels.
struct GenerateOptions {
  std::size_t rows = 10000;
  std::size_t features = 1000;
  std::size_t nnz_per_row = 20;
  double noise = 0.05;
  double zipf_exponent = 1.0;
  std::uint64_t seed = 1;
};
Dataset generate_sparse(const GenerateOptions& options);
// Writes a dataset as libsvm text (labels 0/1 as written, indices 1-based).
void write_libsvm(const Dataset& d, const std::string& path);

// Synthetic low-rank ratings: hidden user and item factors (k entries each, normal
// with variance 1/sqrt(k), so p·q has variance 1), rating = 3 + p_u·q_i + noise*N(0,1).
// Users and items are drawn with power-law (Zipf) popularity; ids run from 1 (as in
// MovieLens). `test_ratings` more ratings from the same hidden model form the test set.
struct RatingsGenerateOptions {
  std::size_t users = 1000;
  std::size_t items = 1000;
  std::size_t rank = 10;
  std::size_t ratings = 100000;
  std::size_t test_ratings = 0;
  double noise = 0.1;
  double zipf_exponent = 0.5;
  std::uint64_t seed = 1;
};
struct GeneratedRatings {
  Dataset train, test;  // test is empty when test_ratings is 0
};
GeneratedRatings generate_ratings(const RatingsGenerateOptions& options);

}  // namespace hogwild
