// Sparse or dense rows for the same data: Dataset::densified and sparsified, the
// storage choice of load_dataset (Storage, stores_dense), and stored_like, which
// makes a test set agree with its training set. Dense rows of bytes are what IDX
// images load as; a libsvm file of the same images gets them back here.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "data/sections.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace {

// The decimals `v` shows: those of its shortest form (what a text file held, for
// a value parsed from at most 7 significant digits: "0.012" shows 3, "0.0117647"
// 7, "1" none).
int decimals_shown(float v) noexcept {
  char buf[32];
  const char* end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific).ptr;
  const char* e = std::find(static_cast<const char*>(buf), end, 'e');
  const char* dot = std::find(static_cast<const char*>(buf), e, '.');
  const int mantissa = dot == e ? 0 : static_cast<int>(e - dot - 1);
  int exponent = 0;
  std::from_chars(e + 1 + (e[1] == '+'), end, exponent);
  return std::max(0, mantissa - exponent);
}

// Whether v is some k/255 within the precision it was written with: to six
// significant digits (LIBSVM's "%g": a relative error of at most 5e-6, plus the
// float's own rounding), or to the decimals it shows, taken as at least 3 ("%.3f"
// and "%.4f" as the scaling tools and converters write pixels, where 0.020 reads
// back as 0.02; half a unit of the third decimal, 5e-4, is less than half the 1/255
// between neighbours, so the match is never ambiguous, and 0.5 is no k/255).
struct ByteMatch {
  int byte = -1;    // k, or -1
  int shown = -1;   // the decimals v shows, where they decided (else -1)
};
ByteMatch byte_of(float v) noexcept {
  if (!(v >= 0.0f && v <= 1.0f)) return {};
  const double k = std::nearbyint(static_cast<double>(v) * 255.0);
  const double exact = k / 255.0, off = std::fabs(static_cast<double>(v) - exact);
  if (off <= 6e-6 * exact) return {static_cast<int>(k), -1};
  const int shown = decimals_shown(v);
  const double half_unit = 0.5 * std::pow(10.0, -std::max(3, shown));
  if (off <= half_unit + 1.2e-7 * static_cast<double>(v))  // + the float's own rounding
    return {static_cast<int>(k), shown};
  return {};
}

// byte_of with the answers of the last values seen, by their bits: an image file
// holds at most 256 distinct values, each met a million times. It remembers the
// most decimals any value matched by its decimals showed: a set whose values all
// show two or fewer was written at that precision, where k/255 cannot be told
// from other numbers (0.02, 0.98), and is not taken as bytes.
class ByteMatcher {
 public:
  int operator()(float v) noexcept {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    Slot& s = slots_[(bits * 2654435761u) >> (32 - kBits)];
    if (!s.used || s.bits != bits) s = {bits, byte_of(v), true};
    if (s.match.shown >= 0) {
      by_decimals_ = true;
      most_shown_ = std::max(most_shown_, s.match.shown);
    }
    return s.match.byte;
  }
  // False when values matched only at the precision of two decimals or fewer.
  bool precise_enough() const noexcept { return !by_decimals_ || most_shown_ >= 3; }

 private:
  static constexpr unsigned kBits = 10;
  struct Slot {
    std::uint32_t bits = 0;
    ByteMatch match;
    bool used = false;
  };
  bool by_decimals_ = false;
  int most_shown_ = 0;
  std::vector<Slot> slots_ = std::vector<Slot>(std::size_t{1} << kBits);
};

// Every stored value some k/255 and every row's indices strictly ascending (a
// duplicate index would have to be summed, and a sum need not be k/255).
bool holds_bytes(const Dataset& d, ByteMatcher& byte) {
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const RowView x = d.row(r);
    for (std::uint32_t j = 0; j < x.nnz; ++j) {
      if (byte(x.value[j]) < 0) return false;
      if (j > 0 && x.index[j] <= x.index[j - 1]) return false;
    }
  }
  return byte.precise_enough();
}

std::size_t checked_cells(std::size_t rows, std::size_t cols) {
  HOGWILD_ENFORCE_LE(cols, std::size_t{std::numeric_limits<std::uint32_t>::max()});
  HOGWILD_ENFORCE(cols == 0 || rows <= std::numeric_limits<std::size_t>::max() / 4 / cols,
                  "rows * cols overflows");
  return rows * cols;
}

}  // namespace

Dataset Dataset::densified(std::size_t cols) const {
  if (layout_ == Layout::ratings)
    throw ConfigError(source_ + " holds rating triples, which have no dense form");
  if (dense() && cols == cols_) return *this;
  const std::size_t cells = checked_cells(rows_, cols);
  ByteMatcher byte;
  const bool bytes = layout_ == Layout::dense_u8 || (layout_ == Layout::sparse && holds_bytes(*this, byte));
  const Layout out = bytes ? Layout::dense_u8 : Layout::dense;
  auto s = detail::make_sections(out, 0, rows_, cells);
  auto storage = MappedBuffer::anonymous(s.end);  // zero-filled: the absent entries
  std::byte* base = storage->data();
  if (rows_) std::memcpy(base + s.labels, labels_, rows_ * sizeof(float));
  auto* pixels = detail::section<std::uint8_t>(base, s.values);
  auto* values = detail::section<float>(base, s.values);
  const std::size_t keep = std::min(cols, cols_);
  for (std::size_t r = 0; r < rows_; ++r) {
    if (layout_ == Layout::dense_u8) {
      std::memcpy(pixels + r * cols, pixels_ + r * cols_, keep);
    } else if (layout_ == Layout::dense) {
      std::memcpy(values + r * cols, values_ + r * cols_, keep * sizeof(float));
    } else {
      const RowView x = row(r);
      for (std::uint32_t j = 0; j < x.nnz; ++j) {
        if (x.index[j] >= cols) continue;
        if (bytes)
          pixels[r * cols + x.index[j]] = static_cast<std::uint8_t>(byte(x.value[j]));
        else
          values[r * cols + x.index[j]] += x.value[j];  // a duplicate index sums, as in a dot
      }
    }
  }
  storage->seal();
  const auto* labels = detail::section<const float>(base, s.labels);
  if (bytes) return view_u8(storage, rows_, cols, labels, pixels, source_);
  return view(storage, Layout::dense, rows_, cols, labels, nullptr, nullptr, values, source_);
}

Dataset Dataset::sparsified() const {
  if (!dense()) return *this;
  std::vector<std::uint64_t> offsets{0};
  offsets.reserve(rows_ + 1);
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  for (std::size_t r = 0; r < rows_; ++r) {
    const RowView x = row(r);
    for (std::uint32_t j = 0; j < x.nnz; ++j) {
      const float v = x.at(j);
      if (v == 0.0f) continue;
      indices.push_back(j);
      values.push_back(v);
    }
    offsets.push_back(indices.size());
  }
  return sparse(labels(), offsets, indices, values, cols_, source_);
}

double density(const Dataset& d) noexcept {
  if (d.dense()) return 1.0;
  const double cells = static_cast<double>(d.rows()) * static_cast<double>(d.cols());
  return cells > 0 ? static_cast<double>(d.nnz()) / cells : 0.0;
}

std::size_t nonzeros(const Dataset& d) noexcept {
  if (!d.dense()) return d.nnz();
  std::size_t n = 0;
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const RowView row = d.row(r);
    for (std::uint32_t j = 0; j < row.nnz; ++j) n += row.bytes ? row.bytes[j] != 0 : row.value[j] != 0;
  }
  return n;
}

Dataset stored_like(const Dataset& d, const Dataset& like) {
  if (d.layout() == Layout::ratings || like.layout() == Layout::ratings) return d;
  return like.dense() ? d.densified(like.cols()) : d.sparsified();
}

Storage parse_storage(std::string_view text) {
  if (text == "auto") return Storage::automatic;
  if (text == "sparse") return Storage::sparse;
  if (text == "dense") return Storage::dense;
  throw ConfigError("--storage expects auto, sparse or dense, got \"" + std::string(text) + "\"");
}

const char* to_string(Storage storage) noexcept {
  switch (storage) {
    case Storage::automatic: return "auto";
    case Storage::sparse: return "sparse";
    case Storage::dense: return "dense";
  }
  return "?";
}

bool stores_dense(const Dataset& d, Storage storage, double dense_at) noexcept {
  if (d.layout() != Layout::sparse || storage == Storage::sparse) return false;
  return storage == Storage::dense || (!d.empty() && density(d) >= dense_at);
}

Dataset with_storage(const Dataset& d, Storage storage, double dense_at) {
  if (storage == Storage::sparse) return d.sparsified();
  return stores_dense(d, storage, dense_at) ? d.densified(d.cols()) : d;
}

}  // namespace hogwild
