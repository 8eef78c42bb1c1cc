// Dataset construction: every array goes into one anonymous shared mapping laid out
// by make_sections, which is then sealed read-only. Workers forked afterwards share
// those pages; a stray write from any of them faults instead of corrupting the data.
#include "hogwild/dataset.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "data/sections.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace {

template <class T>
void copy_into(std::byte* base, std::size_t offset, std::span<const T> from) {
  if (!from.empty()) std::memcpy(base + offset, from.data(), from.size_bytes());
}

}  // namespace

Dataset Dataset::sparse(std::span<const float> labels, std::span<const std::uint64_t> offsets,
                        std::span<const std::uint32_t> indices, std::span<const float> values,
                        std::size_t cols, std::string source) {
  // The arrays come from our own readers or from library users; either way a broken
  // CSR structure is a bug in the caller, so these are invariants, not DataErrors.
  const std::size_t rows = labels.size();
  HOGWILD_ENFORCE_EQ(offsets.size(), rows + 1);
  HOGWILD_ENFORCE_EQ(offsets.front(), std::uint64_t{0});
  HOGWILD_ENFORCE_EQ(offsets.back(), std::uint64_t{indices.size()});
  HOGWILD_ENFORCE_EQ(values.size(), indices.size());
  HOGWILD_ENFORCE_LE(cols, std::size_t{std::numeric_limits<std::uint32_t>::max()} + 1);
  for (std::size_t r = 0; r < rows; ++r) HOGWILD_ENFORCE_LE(offsets[r], offsets[r + 1]);
  for (std::uint32_t i : indices) HOGWILD_ENFORCE_LT(std::size_t{i}, cols);

  auto s = detail::make_sections(Layout::sparse, 0, rows, indices.size());
  auto storage = MappedBuffer::anonymous(s.end);
  std::byte* base = storage->data();
  copy_into(base, s.labels, labels);
  copy_into(base, s.offsets, offsets);
  copy_into(base, s.indices, indices);
  copy_into(base, s.values, values);
  storage->seal();
  return view(storage, Layout::sparse, rows, cols, detail::section<const float>(base, s.labels),
              detail::section<const std::uint64_t>(base, s.offsets),
              detail::section<const std::uint32_t>(base, s.indices),
              detail::section<const float>(base, s.values), std::move(source));
}

Dataset Dataset::dense(std::span<const float> labels, std::span<const float> values,
                       std::size_t cols, std::string source) {
  const std::size_t rows = labels.size();
  HOGWILD_ENFORCE_LE(cols, std::size_t{std::numeric_limits<std::uint32_t>::max()});
  HOGWILD_ENFORCE(cols == 0 || rows <= values.size() / cols, "rows * cols overflows");
  HOGWILD_ENFORCE_EQ(values.size(), rows * cols);

  auto s = detail::make_sections(Layout::dense, 0, rows, values.size());
  auto storage = MappedBuffer::anonymous(s.end);
  std::byte* base = storage->data();
  copy_into(base, s.labels, labels);
  copy_into(base, s.values, values);
  storage->seal();
  return view(storage, Layout::dense, rows, cols, detail::section<const float>(base, s.labels),
              nullptr, nullptr, detail::section<const float>(base, s.values), std::move(source));
}

Dataset Dataset::dense_u8(std::span<const float> labels, std::span<const std::uint8_t> pixels,
                          std::size_t cols, std::string source) {
  const std::size_t rows = labels.size();
  HOGWILD_ENFORCE_LE(cols, std::size_t{std::numeric_limits<std::uint32_t>::max()});
  HOGWILD_ENFORCE(cols == 0 || rows <= pixels.size() / cols, "rows * cols overflows");
  HOGWILD_ENFORCE_EQ(pixels.size(), rows * cols);

  auto s = detail::make_sections(Layout::dense_u8, 0, rows, pixels.size());
  auto storage = MappedBuffer::anonymous(s.end);
  std::byte* base = storage->data();
  copy_into(base, s.labels, labels);
  copy_into(base, s.values, pixels);
  storage->seal();
  return view_u8(storage, rows, cols, detail::section<const float>(base, s.labels),
                 detail::section<const std::uint8_t>(base, s.values), std::move(source));
}

Dataset Dataset::ratings(std::span<const float> labels, std::span<const std::uint32_t> users,
                         std::span<const std::uint32_t> items, std::string source) {
  const std::size_t rows = labels.size();
  HOGWILD_ENFORCE_EQ(users.size(), rows);
  HOGWILD_ENFORCE_EQ(items.size(), rows);
  auto s = detail::make_sections(Layout::ratings, 0, rows, 2 * rows);
  auto storage = MappedBuffer::anonymous(s.end);
  std::byte* base = storage->data();
  copy_into(base, s.labels, labels);
  auto* offsets = detail::section<std::uint64_t>(base, s.offsets);
  auto* indices = detail::section<std::uint32_t>(base, s.indices);
  auto* values = detail::section<float>(base, s.values);
  std::uint32_t max_item = 0;
  offsets[0] = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    offsets[r + 1] = 2 * (r + 1);
    indices[2 * r] = users[r];
    indices[2 * r + 1] = items[r];
    values[2 * r] = values[2 * r + 1] = 1.0f;
    max_item = std::max(max_item, items[r]);
  }
  storage->seal();
  return view(storage, Layout::ratings, rows, rows ? std::size_t{max_item} + 1 : 0,
              detail::section<const float>(base, s.labels), offsets, indices, values,
              std::move(source));
}

Dataset Dataset::view(std::shared_ptr<MappedBuffer> storage, Layout layout, std::size_t rows,
                      std::size_t cols, const float* labels, const std::uint64_t* offsets,
                      const std::uint32_t* indices, const float* values, std::string source) {
  // The caller (a reader or the cache) has validated the arrays; the sparse nnz is
  // whatever the last offset says.
  HOGWILD_ENFORCE(layout != Layout::dense_u8, "dense_u8 arrays are wrapped by view_u8");
  Dataset d;
  d.storage_ = std::move(storage);
  d.layout_ = layout;
  d.rows_ = rows;
  d.cols_ = cols;
  d.labels_ = labels;
  d.values_ = values;
  if (detail::is_csr(layout)) {
    HOGWILD_ENFORCE(offsets != nullptr, "a sparse dataset needs its offsets array");
    d.offsets_ = offsets;
    d.indices_ = indices;
    d.nnz_ = static_cast<std::size_t>(offsets[rows]);
    if (layout == Layout::ratings) {  // validated by the caller: two entries per row
      for (std::size_t r = 0; r < rows; ++r)
        d.users_ = std::max(d.users_, std::size_t{indices[offsets[r]]} + 1);
    }
  } else {
    d.nnz_ = rows * cols;
  }
  d.source_ = std::move(source);
  return d;
}

Dataset Dataset::view_u8(std::shared_ptr<MappedBuffer> storage, std::size_t rows,
                         std::size_t cols, const float* labels, const std::uint8_t* pixels,
                         std::string source) {
  Dataset d;
  d.storage_ = std::move(storage);
  d.layout_ = Layout::dense_u8;
  d.rows_ = rows;
  d.cols_ = cols;
  d.nnz_ = rows * cols;
  d.labels_ = labels;
  d.pixels_ = pixels;
  d.source_ = std::move(source);
  return d;
}

Dataset Dataset::renumbered(std::span<const std::uint32_t> map) const {
  HOGWILD_ENFORCE(layout_ == Layout::sparse, "only a sparse set's columns can be renumbered");
  HOGWILD_ENFORCE(map.size() == cols_, "the map needs one entry per column");
  Dataset d = *this;
  d.index_storage_ = MappedBuffer::anonymous(std::max<std::size_t>(nnz_, 1) * sizeof(std::uint32_t));
  auto* out = reinterpret_cast<std::uint32_t*>(d.index_storage_->data());
  for (std::size_t k = 0; k < nnz_; ++k) out[k] = map[indices_[k]];
  d.index_storage_->seal();
  d.indices_ = out;
  return d;
}

Dataset Dataset::widened() const {
  if (layout_ != Layout::dense_u8) return *this;
  // A 256-entry table of byte_value makes the loop a plain gather.
  std::array<float, 256> table;
  for (std::size_t b = 0; b < table.size(); ++b)
    table[b] = byte_value(static_cast<std::uint8_t>(b));

  auto s = detail::make_sections(Layout::dense, 0, rows_, nnz());
  auto storage = MappedBuffer::anonymous(s.end);
  std::byte* base = storage->data();
  copy_into(base, s.labels, labels());
  auto* values = detail::section<float>(base, s.values);
  for (std::size_t i = 0; i < nnz(); ++i) values[i] = table[pixels_[i]];
  storage->seal();
  return view(storage, Layout::dense, rows_, cols_, detail::section<const float>(base, s.labels),
              nullptr, nullptr, values, source_);
}

std::size_t Dataset::bytes() const noexcept {
  std::size_t b = rows_ * sizeof(float) + nnz() * detail::value_size(layout_);
  if (detail::is_csr(layout_) && labels_ != nullptr)
    b += (rows_ + 1) * sizeof(std::uint64_t) + nnz_ * sizeof(std::uint32_t);
  return b;
}

const char* to_string(Layout layout) noexcept {
  switch (layout) {
    case Layout::sparse: return "sparse";
    case Layout::dense: return "dense";
    case Layout::ratings: return "ratings";
    case Layout::dense_u8: return "dense-u8";
  }
  return "?";
}

DatasetStats describe(const Dataset& d) {
  constexpr std::size_t kMaxLabels = 1000;
  DatasetStats st;
  st.rows = d.rows();
  st.cols = d.cols();
  st.nnz = nonzeros(d);  // an image's, not rows x columns
  // Most sets have two to a hundred classes; a regression target has a distinct
  // label per row, and counting those is noise, so counting stops at kMaxLabels.
  std::unordered_map<float, std::size_t> counts;
  for (float y : d.labels()) {
    auto it = counts.find(y);
    if (it != counts.end()) {
      ++it->second;
    } else if (counts.size() < kMaxLabels) {
      counts.emplace(y, 1);
    } else {
      st.many_labels = true;
    }
  }
  st.label_counts.assign(counts.begin(), counts.end());
  std::sort(st.label_counts.begin(), st.label_counts.end());
  return st;
}

}  // namespace hogwild
