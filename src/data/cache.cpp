// The binary cache: a fixed header, then the Dataset's arrays exactly as they sit in
// memory (little-endian, 64-byte aligned). open_cache maps the file read-only and
// uses the arrays in place, so N workers share the page cache and nothing is parsed.
// Because a cache is trusted in place, open_cache checks everything a model could
// trip over: header fields, section bounds, CSR structure, index range, finiteness.
// Dense_u8 values are bytes (any byte is a value in [0, 1]): only their labels and
// the section bounds need checking.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <zlib.h>
#include <unistd.h>

#include "data/cache_fd.hpp"
#include "data/file_io.hpp"
#include "data/sections.hpp"
#include "data/tbb_session.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace {

static_assert(std::endian::native == std::endian::little,
              "the cache stores arrays as they are in memory, little-endian");

constexpr char kMagic[8] = {'H', 'W', 'D', 'S', 'E', 'T', '0', '1'};
// 2: a trailer with each section's CRC-32 follows the sections (a flipped bit that
// left a valid row, a label's sign, loaded silently). Version 1 is read as before.
constexpr std::uint32_t kVersion = 2;

// Version 1. Any change to this struct or to the sections of an existing layout
// bumps kVersion. A new layout value does not: a reader rejects every layout it
// does not know with "unknown layout N" (what a build older than dense_u8 says of
// a layout 3 cache), and reads the old layouts as before.
struct CacheHeader {
  char magic[8];
  std::uint32_t version;
  // Layout: 0 sparse, 1 dense, 2 ratings (CSR, 2 entries a row), 3 dense_u8 (dense,
  // values are bytes: value = byte / 255).
  std::uint32_t layout;
  std::uint64_t rows, cols;
  std::uint64_t nnz;  // entries of the values array (rows * cols when dense or dense_u8)
  std::uint64_t labels_offset, offsets_offset, indices_offset, values_offset;
  std::uint64_t file_size;
  std::uint64_t checksum;  // FNV-1a 64 of every byte above
};
static_assert(sizeof(CacheHeader) == 88 && std::has_unique_object_representations_v<CacheHeader>,
              "the header is written byte for byte: no padding allowed");

std::uint64_t fnv1a(const void* data, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::uint64_t header_checksum(const CacheHeader& h) {
  return fnv1a(&h, offsetof(CacheHeader, checksum));
}

// Version 2: the last 32 bytes of the file (file_size counts them).
constexpr char kTrailerMagic[8] = {'H', 'W', 'D', 'S', 'U', 'M', '0', '1'};
constexpr const char* kSectionNames[4] = {"labels", "offsets", "indices", "values"};
struct CacheTrailer {
  char magic[8];
  std::uint32_t crc[4];    // CRC-32 of the labels, offsets, indices and values sections
  std::uint64_t checksum;  // FNV-1a 64 of every byte above
};
static_assert(sizeof(CacheTrailer) == 32 && std::has_unique_object_representations_v<CacheTrailer>,
              "the trailer is written byte for byte: no padding allowed");

std::uint32_t crc32_of(const void* data, std::size_t n) {
  std::uint32_t c = static_cast<std::uint32_t>(crc32(0L, Z_NULL, 0));
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib takes a uInt at a time
    const auto step = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    c = static_cast<std::uint32_t>(crc32(c, p, step));
    p += step;
    n -= step;
  }
  return c;
}

// What can be wrong with one row; the first bad row is found in parallel and
// described afterwards, so the scan itself stays a tight loop.
enum class RowFault { none, offsets, label, index_range, unsorted, value, rating_entries, user_range };

struct Arrays {
  std::uint64_t rows, cols, nnz;
  const float* labels;
  const std::uint64_t* offsets;
  const std::uint32_t* indices;
  const float* values;         // null for dense_u8
  const std::uint8_t* pixels;  // dense_u8 only
};

RowFault check_sparse_row(const Arrays& a, std::size_t r) {
  const std::uint64_t b = a.offsets[r], e = a.offsets[r + 1];
  if (b > e || e > a.nnz) return RowFault::offsets;
  if (!std::isfinite(a.labels[r])) return RowFault::label;
  for (std::uint64_t i = b; i < e; ++i) {
    if (a.indices[i] >= a.cols) return RowFault::index_range;
    if (i > b && a.indices[i] <= a.indices[i - 1]) return RowFault::unsorted;
    if (!std::isfinite(a.values[i])) return RowFault::value;
  }
  return RowFault::none;
}

// A rating row: exactly two entries, user (any id up to kMaxRatingId), item < cols.
RowFault check_ratings_row(const Arrays& a, std::size_t r) {
  const std::uint64_t b = a.offsets[r], e = a.offsets[r + 1];
  if (b > e || e > a.nnz) return RowFault::offsets;
  if (e - b != 2) return RowFault::rating_entries;
  if (!std::isfinite(a.labels[r])) return RowFault::label;
  if (a.indices[b] > kMaxRatingId) return RowFault::user_range;
  if (a.indices[b + 1] >= a.cols) return RowFault::index_range;
  if (!std::isfinite(a.values[b]) || !std::isfinite(a.values[b + 1])) return RowFault::value;
  return RowFault::none;
}

RowFault check_dense_row(const Arrays& a, std::size_t r) {
  if (!std::isfinite(a.labels[r])) return RowFault::label;
  const float* v = a.values + r * a.cols;
  for (std::uint64_t c = 0; c < a.cols; ++c)
    if (!std::isfinite(v[c])) return RowFault::value;
  return RowFault::none;
}

// Every byte is a value in [0, 1]: only the label can be wrong.
RowFault check_dense_u8_row(const Arrays& a, std::size_t r) {
  return std::isfinite(a.labels[r]) ? RowFault::none : RowFault::label;
}

std::string describe_fault(const Arrays& a, std::size_t r, RowFault f, Layout layout) {
  const bool csr = detail::is_csr(layout);
  const std::string row = "row " + std::to_string(r + 1) + ": ";
  auto first = [&](auto&& pred) {  // first entry of row r for which pred holds
    std::uint64_t b = csr ? a.offsets[r] : r * a.cols, e = csr ? a.offsets[r + 1] : b + a.cols;
    for (std::uint64_t i = b; i < e; ++i)
      if (pred(i)) return i;
    return e;
  };
  switch (f) {
    case RowFault::offsets:
      return row + "CSR offsets are not monotonic or run past the non-zeros (" +
             std::to_string(a.offsets[r]) + " then " + std::to_string(a.offsets[r + 1]) + ", nnz " +
             std::to_string(a.nnz) + ")";
    case RowFault::label: return row + "label is not finite";
    case RowFault::index_range: {
      if (layout == Layout::ratings)  // the item, the row's second entry
        return row + "item id " + std::to_string(a.indices[a.offsets[r] + 1]) + " >= cols " +
               std::to_string(a.cols);
      auto i = first([&](auto i) { return a.indices[i] >= a.cols; });
      return row + "feature index " + std::to_string(a.indices[i]) + " >= cols " +
             std::to_string(a.cols);
    }
    case RowFault::unsorted: {
      auto i = first([&](auto i) { return i > a.offsets[r] && a.indices[i] <= a.indices[i - 1]; });
      return row + "feature indices not strictly ascending (" + std::to_string(a.indices[i - 1]) +
             " then " + std::to_string(a.indices[i]) + ")";
    }
    case RowFault::value: return row + "a value is not finite";  // never dense_u8's bytes
    case RowFault::rating_entries:
      return row + "a rating row has " + std::to_string(a.offsets[r + 1] - a.offsets[r]) +
             " entries, not 2 (user, item)";
    case RowFault::user_range:
      return row + "user id " + std::to_string(a.indices[a.offsets[r]]) + " > " +
             std::to_string(kMaxRatingId);
    case RowFault::none: break;
  }
  return row + "unknown fault";
}

// Index of the first bad row, or rows when all are good. Large caches are scanned
// by TBB; its threads are joined before this returns (the caller may fork).
template <class Check>
std::size_t first_bad_row(std::size_t rows, std::size_t work, Check check) {
  auto scan = [&](std::size_t lo, std::size_t hi) {
    for (std::size_t r = lo; r < hi; ++r)
      if (check(r) != RowFault::none) return r;
    return hi;
  };
  if (work < (std::size_t{1} << 22)) return scan(0, rows);
  detail::TbbSession tbb(0);
  return tbb.run([&] {
    return oneapi::tbb::parallel_reduce(
        oneapi::tbb::blocked_range<std::size_t>(0, rows), rows,
        tbb.task([&](const auto& range, std::size_t found) {
          std::size_t r = scan(range.begin(), range.end());
          return r < range.end() ? std::min(found, r) : found;
        }),
        tbb.task([](std::size_t x, std::size_t y) { return std::min(x, y); }));
  });
}

}  // namespace

namespace {
// trusted: a memory file this program's parent wrote from rows it had checked
// (cache_memfd): the structure is checked, the rows and checksums are not.
Dataset validate_cache(std::shared_ptr<MappedBuffer> map, const std::string& path,
                       bool trusted = false);
}  // namespace

namespace {

// The cache's bytes in order, through sink(data, n): its padding included. Without
// `checksums` the trailer's section checksums are 0 (a hand-off to a worker, read
// back trusted).
template <class Sink>
void emit_cache(const Dataset& d, Sink&& sink, bool checksums = true) {
  const bool csr = detail::is_csr(d.layout());
  const bool bytes = d.layout() == Layout::dense_u8;
  const std::size_t nvalues = bytes ? d.pixels().size() : d.values().size();
  const auto s = detail::make_sections(d.layout(), sizeof(CacheHeader), d.rows(), nvalues);

  const std::uint64_t zero = 0;  // a default-constructed Dataset has no offsets array
  const auto offsets = d.offsets();
  const void* offsets_data = offsets.data() ? static_cast<const void*>(offsets.data()) : &zero;
  const void* values_data = bytes ? static_cast<const void*>(d.pixels().data())
                                  : static_cast<const void*>(d.values().data());
  CacheTrailer t{};
  std::memcpy(t.magic, kTrailerMagic, sizeof kTrailerMagic);
  if (checksums) {
    t.crc[0] = crc32_of(d.labels().data(), d.rows() * sizeof(float));
    t.crc[1] = csr ? crc32_of(offsets_data, (d.rows() + 1) * sizeof(std::uint64_t)) : crc32_of(nullptr, 0);
    t.crc[2] = csr ? crc32_of(d.indices().data(), nvalues * sizeof(std::uint32_t)) : crc32_of(nullptr, 0);
    t.crc[3] = crc32_of(values_data, nvalues * detail::value_size(d.layout()));
  }
  t.checksum = fnv1a(&t, offsetof(CacheTrailer, checksum));

  CacheHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.layout = static_cast<std::uint32_t>(d.layout());
  h.rows = d.rows();
  h.cols = d.cols();
  h.nnz = nvalues;
  h.labels_offset = s.labels;
  h.offsets_offset = s.offsets;
  h.indices_offset = s.indices;
  h.values_offset = s.values;
  h.file_size = s.end + sizeof(CacheTrailer);
  h.checksum = header_checksum(h);

  std::size_t written = 0;
  auto put = [&](std::size_t at, const void* data, std::size_t n) {
    static constexpr char zeros[detail::kSectionAlign] = {};
    HOGWILD_ENFORCE_LE(written, at);
    sink(zeros, at - written);  // padding up to the aligned section start
    if (n) sink(data, n);
    written = at + n;
  };
  put(0, &h, sizeof h);
  put(s.labels, d.labels().data(), d.rows() * sizeof(float));
  if (csr) {
    put(s.offsets, offsets_data, (d.rows() + 1) * sizeof(std::uint64_t));
    put(s.indices, d.indices().data(), nvalues * sizeof(std::uint32_t));
  }
  put(s.values, values_data, nvalues * detail::value_size(d.layout()));
  put(s.end, &t, sizeof t);
  HOGWILD_ENFORCE_EQ(written, h.file_size);
}

}  // namespace

void write_cache(const Dataset& d, const std::string& path) {
  detail::OutputFile out(path, false);
  emit_cache(d, [&](const void* data, std::size_t n) { out.write(data, n); });
  out.commit();
}

namespace detail {

int cache_memfd(const Dataset& d) {
  if (const int whole = d.memory_file(); whole >= 0) {  // in_memory_file's: handed as it is
    const int fd = ::fcntl(whole, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
      throw ResourceError(fmt::format("cannot hand {} on: {}", d.source(), std::strerror(errno)));
    return fd;
  }
  const int fd = memfd_create("hogwild-rows", MFD_CLOEXEC);
  if (fd < 0)
    throw ResourceError(fmt::format("cannot make a memory file for {}: {}", d.source(),
                                    std::strerror(errno)));
  try {
    // No checksums: nothing stores these bytes; the worker reads them back at once
    // (computing them cost SpamAssassin's 9 MB 4 ms of every run's start, and
    // checking them and the rows in the worker 3.5 ms more).
    emit_cache(
        d,
        [&](const void* data, std::size_t n) {
          if (const int err = detail::write_all(fd, data, n))
            throw ResourceError(fmt::format("cannot copy {} into a memory file: {}", d.source(),
                                            std::strerror(err)));
        },
        false);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

Dataset open_cache_fd(int fd, const std::string& name) {
  return validate_cache(MappedBuffer::map_file(fmt::format("/proc/self/fd/{}", fd)), name, true);
}

}  // namespace detail

Dataset open_cache(const std::string& path) { return validate_cache(MappedBuffer::map_file(path), path); }

Dataset in_memory_file(const Dataset& d) {
  return validate_cache(MappedBuffer::map_memory_file(detail::cache_memfd(d)), d.source(), true);
}

Dataset parse_cache(std::string_view bytes, const std::string& name) {
  auto map = MappedBuffer::anonymous(bytes.size());
  if (!bytes.empty()) std::memcpy(map->data(), bytes.data(), bytes.size());
  map->seal();
  return validate_cache(std::move(map), name);
}

namespace {

Dataset validate_cache(std::shared_ptr<MappedBuffer> map, const std::string& path, bool trusted) {
  const std::size_t size = map->size();
  const std::byte* base = map->data();
  auto fail = [&](const std::string& what) { return DataError(path, 0, what); };

  if (size < sizeof kMagic || std::memcmp(base, kMagic, sizeof kMagic) != 0) {
    bool gz = detail::is_gzip({reinterpret_cast<const char*>(base), size});
    throw fail(std::string("not a hogwild cache (bad magic)") +
               (gz ? "; it is gzip'ed, and a cache must be gunzip'ed to be mapped" : ""));
  }
  if (size < sizeof(CacheHeader))
    throw fail("truncated: the file has " + std::to_string(size) + " bytes, less than the " +
               std::to_string(sizeof(CacheHeader)) + "-byte header");
  CacheHeader h;
  std::memcpy(&h, base, sizeof h);
  if (h.version != kVersion && h.version != 1)
    throw fail("format version " + std::to_string(h.version) + ", this build reads 1 and " +
               std::to_string(kVersion));
  if (h.checksum != header_checksum(h)) throw fail("header checksum mismatch (corrupt header)");
  if (h.file_size > size)
    throw fail("truncated: header says " + std::to_string(h.file_size) + " bytes, file has " +
               std::to_string(size));
  if (h.file_size < size)
    throw fail("header says " + std::to_string(h.file_size) + " bytes, file has " +
               std::to_string(size) + " (trailing bytes)");
  // Version 2: the sections end where the trailer of their checksums starts.
  const bool trailer = h.version >= 2;
  if (trailer && size < sizeof(CacheHeader) + sizeof(CacheTrailer))
    throw fail("truncated: the file has " + std::to_string(size) + " bytes, less than a header "
               "and the checksums' trailer");
  const std::size_t payload_end = trailer ? size - sizeof(CacheTrailer) : size;
  if (h.layout > static_cast<std::uint32_t>(Layout::dense_u8))
    throw fail("unknown layout " + std::to_string(h.layout));
  const auto layout = static_cast<Layout>(h.layout);
  const bool sparse = detail::is_csr(layout);  // CSR arrays: sparse and ratings
  const bool bytes = layout == Layout::dense_u8;

  // Shapes: every count is bounded by the file size before anything is multiplied.
  if (h.rows > size || h.nnz > size)
    throw fail("header declares " + std::to_string(h.rows) + " rows and " + std::to_string(h.nnz) +
               " values, more than a " + std::to_string(size) + "-byte file can hold");
  if (sparse && h.cols > std::uint64_t{std::numeric_limits<std::uint32_t>::max()} + 1)
    throw fail("cols " + std::to_string(h.cols) + " does not fit 32-bit feature indices");
  if (layout == Layout::ratings && (h.nnz != 2 * h.rows || h.cols > kMaxRatingId + 1ull))
    throw fail("ratings: " + std::to_string(h.nnz) + " entries for " + std::to_string(h.rows) +
               " rows (two a row expected) and " + std::to_string(h.cols) + " items (at most " +
               std::to_string(kMaxRatingId + 1ull) + ")");
  if (!sparse && (h.cols > std::numeric_limits<std::uint32_t>::max() ||
                  (h.cols != 0 && h.rows > h.nnz / h.cols) || h.rows * h.cols != h.nnz))
    throw fail("dense shape " + std::to_string(h.rows) + "x" + std::to_string(h.cols) +
               " does not match " + std::to_string(h.nnz) + " values");

  // Sections: aligned, in order, not overlapping, inside the file.
  struct Section {
    const char* name;
    std::uint64_t offset, bytes;
  };
  const Section sections[] = {
      {"labels", h.labels_offset, h.rows * sizeof(float)},
      {"offsets", h.offsets_offset, sparse ? (h.rows + 1) * sizeof(std::uint64_t) : 0},
      {"indices", h.indices_offset, sparse ? h.nnz * sizeof(std::uint32_t) : 0},
      {"values", h.values_offset, h.nnz * detail::value_size(layout)},
  };
  std::uint64_t end = sizeof(CacheHeader);
  for (const Section& sec : sections) {
    if (sec.offset % detail::kSectionAlign != 0 || sec.offset < end || sec.offset > payload_end ||
        sec.bytes > payload_end - sec.offset)
      throw fail(std::string(sec.name) + " section (offset " + std::to_string(sec.offset) + ", " +
                 std::to_string(sec.bytes) + " bytes) is misaligned, overlaps another " +
                 "or lies outside the " + std::to_string(size) + "-byte file");
    end = sec.offset + sec.bytes;
  }

  Arrays a{h.rows,
           h.cols,
           h.nnz,
           reinterpret_cast<const float*>(base + h.labels_offset),
           sparse ? reinterpret_cast<const std::uint64_t*>(base + h.offsets_offset) : nullptr,
           sparse ? reinterpret_cast<const std::uint32_t*>(base + h.indices_offset) : nullptr,
           bytes ? nullptr : reinterpret_cast<const float*>(base + h.values_offset),
           bytes ? reinterpret_cast<const std::uint8_t*>(base + h.values_offset) : nullptr};
  if (sparse && (a.offsets[0] != 0 || a.offsets[a.rows] != a.nnz))
    throw fail("CSR offsets must run from 0 to nnz " + std::to_string(a.nnz) + ", they run from " +
               std::to_string(a.offsets[0]) + " to " + std::to_string(a.offsets[a.rows]));
  auto check = [&](std::size_t r) {
    switch (layout) {
      case Layout::sparse: return check_sparse_row(a, r);
      case Layout::ratings: return check_ratings_row(a, r);
      case Layout::dense_u8: return check_dense_u8_row(a, r);
      case Layout::dense: break;
    }
    return check_dense_row(a, r);
  };
  std::size_t bad = trusted ? a.rows : first_bad_row(a.rows, bytes ? a.rows : a.rows + a.nnz, check);
  if (bad < a.rows)
    throw fail(describe_fault(a, bad, check(bad), layout));
  // Rows that are all valid can still be wrong: each section against its checksum.
  if (trailer) {
    CacheTrailer t;
    std::memcpy(&t, base + payload_end, sizeof t);
    if (std::memcmp(t.magic, kTrailerMagic, sizeof kTrailerMagic) != 0 ||
        t.checksum != fnv1a(&t, offsetof(CacheTrailer, checksum)))
      throw fail("the trailer of section checksums is corrupt");
    for (int i = 0; i < 4 && !trusted; ++i)
      if (crc32_of(base + sections[i].offset, sections[i].bytes) != t.crc[i])
        throw fail(fmt::format("the {} section does not match its checksum: the file is "
                               "corrupt (a flipped bit?); make the cache again from its source",
                               kSectionNames[i]));
  }

  if (bytes) return Dataset::view_u8(std::move(map), a.rows, a.cols, a.labels, a.pixels, path);
  return Dataset::view(std::move(map), layout, a.rows, a.cols,
                       a.labels, a.offsets, a.indices, a.values, path);
}

}  // namespace

}  // namespace hogwild
