// A training or test set, loaded once by the parent and shared by every worker.
// Rows are either sparse (CSR: ascending 0-based column indices and values),
// dense (row-major floats), dense bytes (row-major, value = byte / 255: 8-bit images
// as IDX files hold them, a quarter of the float rows' memory traffic) or ratings (CSR with exactly two entries per row: user
// id, then item id, values 1; the rating is the label). The arrays live in an anonymous shared mapping or in a
// read-only mmap of a binary cache, so N forked workers never hold N copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hogwild/row_view.hpp"

namespace hogwild {

// One contiguous read-only (once sealed) memory mapping.
class MappedBuffer {
 public:
  // MAP_SHARED | MAP_ANONYMOUS: writable, inherited by forked children, nothing to clean up.
  static std::shared_ptr<MappedBuffer> anonymous(std::size_t bytes);
  // PROT_READ mapping of a whole file.
  static std::shared_ptr<MappedBuffer> map_file(const std::string& path);
  // PROT_READ mapping of a whole memory file (memfd), which the buffer then owns:
  // a worker started by the fork server can be handed its descriptor (memory_file()).
  static std::shared_ptr<MappedBuffer> map_memory_file(int fd);

  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  ~MappedBuffer();

  // The memory file mapped (map_memory_file), or -1.
  int memory_file() const noexcept { return fd_; }
  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // Makes an anonymous mapping read-only (mprotect), so a stray write faults.
  void seal();
  // Gives the whole pages inside bytes [begin, end) of an anonymous mapping back to
  // the system (they read as zeros afterwards); for a reader that sized generously.
  void release(std::size_t begin, std::size_t end);

 private:
  MappedBuffer(std::byte* data, std::size_t size, int fd = -1) : data_(data), size_(size), fd_(fd) {}
  std::byte* data_;
  std::size_t size_;
  int fd_;
};

enum class Layout : std::uint8_t { sparse = 0, dense = 1, ratings = 2, dense_u8 = 3 };
const char* to_string(Layout layout) noexcept;

class Dataset {
 public:
  Dataset() = default;

  // Copies the arrays into one anonymous shared mapping. offsets has rows+1 entries.
  static Dataset sparse(std::span<const float> labels, std::span<const std::uint64_t> offsets,
                        std::span<const std::uint32_t> indices, std::span<const float> values,
                        std::size_t cols, std::string source);
  static Dataset dense(std::span<const float> labels, std::span<const float> values,
                       std::size_t cols, std::string source);
  // Dense rows of bytes (value = byte / 255); pixels has rows * cols entries.
  static Dataset dense_u8(std::span<const float> labels, std::span<const std::uint8_t> pixels,
                          std::size_t cols, std::string source);
  // Rating triples (user[r], item[r], labels[r]) with raw ids (see users()).
  static Dataset ratings(std::span<const float> labels, std::span<const std::uint32_t> users,
                         std::span<const std::uint32_t> items, std::string source);
  // Wraps arrays that already live in `storage` (used by the binary cache).
  static Dataset view(std::shared_ptr<MappedBuffer> storage, Layout layout, std::size_t rows,
                      std::size_t cols, const float* labels, const std::uint64_t* offsets,
                      const std::uint32_t* indices, const float* values, std::string source);
  static Dataset view_u8(std::shared_ptr<MappedBuffer> storage, std::size_t rows,
                         std::size_t cols, const float* labels, const std::uint8_t* pixels,
                         std::string source);
  // A sparse set whose every column index j reads map[j] (map has cols() entries),
  // in a new shared mapping of the indices; labels, offsets and values stay shared
  // with this set. Rows are no longer in ascending index order. For hot coordinates.
  Dataset renumbered(std::span<const std::uint32_t> map) const;
  // A dense_u8 set as floats (a new shared mapping, 4x its pixels' bytes); any other
  // set is returned as it is (sharing its storage).
  Dataset widened() const;
  // The set as dense rows of `cols` columns, in a new shared mapping (src/data/storage.cpp).
  // A sparse set's entries at columns >= cols are dropped; it becomes bytes (dense_u8)
  // when every stored value is some k/255 to six significant digits (the precision
  // of LIBSVM's "%g": 0.0117647 for 3/255; the byte then reads exactly byte_value(k)),
  // floats otherwise. A dense or dense_u8 set keeps its kind, rows cut or zero-padded
  // (returned as it is when cols == cols()). Ratings are refused (ConfigError).
  Dataset densified(std::size_t cols) const;
  // A dense or dense_u8 set as CSR rows of its non-zero values (floats, cols()
  // columns); a sparse or ratings set is returned as it is.
  Dataset sparsified() const;

  Layout layout() const noexcept { return layout_; }
  std::size_t rows() const noexcept { return rows_; }
  // Ratings: cols() is 1 + the largest item id and users() 1 + the largest user id
  // (ids are kept as the file has them); users() is 0 for the other layouts.
  std::size_t cols() const noexcept { return cols_; }
  std::size_t users() const noexcept { return users_; }
  // Dense and dense_u8: every row has cols() values.
  bool dense() const noexcept { return layout_ == Layout::dense || layout_ == Layout::dense_u8; }
  std::size_t nnz() const noexcept { return dense() ? rows_ * cols_ : nnz_; }
  const std::string& source() const noexcept { return source_; }
  bool empty() const noexcept { return rows_ == 0; }

  float label(std::size_t r) const noexcept { return labels_[r]; }
  std::span<const float> labels() const noexcept { return {labels_, rows_}; }
  RowView row(std::size_t r) const noexcept {
    if (layout_ == Layout::dense)
      return {nullptr, values_ + r * cols_, static_cast<std::uint32_t>(cols_)};
    if (layout_ == Layout::dense_u8)
      return {nullptr, nullptr, static_cast<std::uint32_t>(cols_), pixels_ + r * cols_};
    return {indices_ + offsets_[r], values_ + offsets_[r],
            static_cast<std::uint32_t>(offsets_[r + 1] - offsets_[r])};
  }
  // Sparse and ratings layouts only (empty spans for the dense ones).
  std::span<const std::uint64_t> offsets() const noexcept {
    return !dense() ? std::span<const std::uint64_t>{offsets_, rows_ + 1}
                    : std::span<const std::uint64_t>{};
  }
  std::span<const std::uint32_t> indices() const noexcept {
    return !dense() ? std::span<const std::uint32_t>{indices_, nnz_}
                    : std::span<const std::uint32_t>{};
  }
  // Every layout but dense_u8 (empty there: see pixels()).
  std::span<const float> values() const noexcept {
    return layout_ != Layout::dense_u8 ? std::span<const float>{values_, nnz()}
                                       : std::span<const float>{};
  }
  // dense_u8 only: rows * cols bytes, row-major (empty for the other layouts).
  std::span<const std::uint8_t> pixels() const noexcept {
    return layout_ == Layout::dense_u8 ? std::span<const std::uint8_t>{pixels_, nnz()}
                                       : std::span<const std::uint8_t>{};
  }
  // Bytes of the arrays (what N workers share rather than copy).
  std::size_t bytes() const noexcept;
  // The memory file this set is the whole of, in the cache format (in_memory_file,
  // data_io.hpp), or -1: what a fork-server worker is handed instead of a copy.
  int memory_file() const noexcept {
    return storage_ && !index_storage_ ? storage_->memory_file() : -1;
  }

 private:
  std::shared_ptr<MappedBuffer> storage_;
  std::shared_ptr<MappedBuffer> index_storage_;  // renumbered(): its own indices
  Layout layout_ = Layout::sparse;
  std::size_t rows_ = 0, cols_ = 0, nnz_ = 0, users_ = 0;
  const float* labels_ = nullptr;
  const std::uint64_t* offsets_ = nullptr;
  const std::uint32_t* indices_ = nullptr;
  const float* values_ = nullptr;
  const std::uint8_t* pixels_ = nullptr;
  std::string source_;
};

// Summary used by `hogwild_data info` and by the trainer's start-up line.
struct DatasetStats {
  std::size_t rows = 0, cols = 0, nnz = 0;
  std::vector<std::pair<float, std::size_t>> label_counts;  // sorted by label; at most 1000 kept
  bool many_labels = false;                                 // more than 1000 distinct labels
};
DatasetStats describe(const Dataset& d);

// nnz / (rows * cols) of a sparse set (0 for an empty one); 1 for the dense layouts.
double density(const Dataset& d) noexcept;
// The values that are not zero: a sparse set's stored ones (nnz()), or a dense
// set's counted (nnz() counts every cell of dense rows: an IDX image's black
// pixels too).
std::size_t nonzeros(const Dataset& d) noexcept;

// `d` stored the way `like` stores its rows, for a test set that must agree with its
// training set: dense rows of like.cols() columns when `like` is dense or dense_u8
// (columns beyond those have no trained weight), sparse rows when `like` is sparse.
// Ratings sets, and sets already stored so, are returned as they are.
Dataset stored_like(const Dataset& d, const Dataset& like);

}  // namespace hogwild
