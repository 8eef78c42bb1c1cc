// libsvm/svmlight text reader. The text is cut into chunks at line boundaries and
// read in two parallel passes (TBB): the first counts each chunk's newlines and
// colons, upper bounds of its rows and entries, and so gives every chunk its own
// slot in the one shared mapping of the Dataset; the second parses each chunk
// straight into its slot. There is no second copy of the parsed data, and each page
// of the mapping is first touched by the thread that fills it. Line numbers in
// errors are global: each chunk counts its lines, and a prefix sum places them.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "data/file_io.hpp"
#include "data/sections.hpp"
#include "data/text.hpp"
#include "data/tbb_session.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace {

using detail::NumError;
using detail::parse_float;
using detail::quote;

constexpr std::uint64_t kMaxIndex = std::numeric_limits<std::uint32_t>::max();

// Where one chunk of text goes and what it became. Rows and entries are written
// from slot_row and slot_entry on; the slots are sized by the counting pass.
struct Chunk {
  std::string_view text;
  std::size_t row_cap = 0, entry_cap = 0;    // upper bounds: lines, colons
  std::size_t slot_row = 0, slot_entry = 0;  // prefix sums of the caps
  std::size_t rows = 0, entries = 0;         // what the parse found
  std::uint64_t max_index = 0;  // largest 1-based index seen
  std::size_t lines = 0;        // lines parsed (all of them, unless an error stopped us)
  std::size_t error_line = 0;   // 1-based within the chunk; 0 = no error
  std::string error;
};

// The Dataset's arrays in the shared mapping.
struct Arrays {
  float* labels;
  std::uint64_t* offsets;  // rows + 1 of them; offsets[0] = 0
  std::uint32_t* indices;
  float* values;
};

// Every row ends a line and every entry holds its own ':', so the number of lines
// and of colons bound what the parse can write. Blank and comment lines, qid: and
// colons in comments make the bounds loose; the usual file has them exact.
void count_caps(Chunk& c) {
  const auto* p = reinterpret_cast<const unsigned char*>(c.text.data());
  const std::size_t n = c.text.size();
  std::size_t newlines = 0, colons = 0;
  // Byte-wide counters over blocks of at most 255 bytes: the loop vectorizes.
  for (std::size_t i = 0; i < n;) {
    const std::size_t m = std::min<std::size_t>(n - i, 255);
    std::uint8_t nl = 0, co = 0;
    for (std::size_t j = 0; j < m; ++j) {
      nl = static_cast<std::uint8_t>(nl + (p[i + j] == '\n'));
      co = static_cast<std::uint8_t>(co + (p[i + j] == ':'));
    }
    newlines += nl;
    colons += co;
    i += m;
  }
  c.row_cap = newlines + (n > 0 && p[n - 1] != '\n');
  c.entry_cap = colons;
}

inline bool is_blank(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r';
}
// A token ends at a blank or where a comment starts.
inline bool ends_token(char c) noexcept {
  return is_blank(c) || c == '#';
}

class ChunkParser {
 public:
  // Offsets are written as global entry numbers on the assumption that every slot
  // before this one is full; parse_libsvm corrects them when one is not.
  ChunkParser(Chunk& c, const Arrays& out)
      : c_(c),
        labels_(out.labels + c.slot_row),
        ends_(out.offsets + c.slot_row + 1),
        indices_(out.indices + c.slot_entry),
        values_(out.values + c.slot_entry) {}

  void run() {
    const char* p = c_.text.data();
    const char* const end = p + c_.text.size();
    while (p < end) {
      ++c_.lines;
      auto* eol = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      if (!eol) eol = end;
      if (!line(p, eol)) {
        c_.error_line = c_.lines;
        return;
      }
      p = eol + 1;
    }
  }

 private:
  bool fail(std::string what) {
    c_.error = std::move(what);
    return false;
  }

  // One line: [label] {index:value | qid:N} [# comment]. Returns false on an error.
  bool line(const char* p, const char* const e) {
    while (p < e && is_blank(*p)) ++p;
    if (p == e || *p == '#') return true;  // blank or comment-only line

    const char* t = p;
    while (p < e && !ends_token(*p)) ++p;
    float label;
    switch (parse_float(t, p, label)) {
      case NumError::none: break;
      case NumError::not_finite: return fail("label " + quote({t, p}) + " is not finite");
      case NumError::range: return fail("label " + quote({t, p}) + " is out of range for a float");
      case NumError::syntax: return fail("expected a label (number) but found " + quote({t, p}));
    }

    const std::size_t row_start = c_.entries;
    std::uint64_t prev = 0;
    bool sorted = true;
    for (;;) {
      while (p < e && is_blank(*p)) ++p;
      if (p == e || *p == '#') break;
      t = p;
      // A hand-written index loop: digits only, and it remembers overflow instead of
      // wrapping, so that 99999999999 is reported as out of range, not as garbage.
      std::uint64_t idx = 0;
      bool overflow = false;
      while (p < e && static_cast<unsigned>(*p - '0') < 10) {
        idx = idx * 10 + static_cast<unsigned>(*p - '0');
        overflow |= idx > kMaxIndex;
        if (overflow) idx = kMaxIndex + 1;
        ++p;
      }
      if (p == t || p == e || *p != ':') {
        while (p < e && !ends_token(*p)) ++p;
        std::string_view token(t, static_cast<std::size_t>(p - t));
        if (token.starts_with("qid:")) continue;  // svmlight ranking groups: not ours
        return fail("expected \"index:value\" but found " + quote(token));
      }
      if (overflow)
        return fail("index " + std::string(t, p) + " is out of range (at most " +
                    std::to_string(kMaxIndex) + ")");
      if (idx == 0) return fail("feature index 0: libsvm indices are 1-based");
      const char* v = ++p;
      while (p < e && !ends_token(*p)) ++p;
      float value;
      switch (parse_float(v, p, value)) {
        case NumError::none: break;
        case NumError::not_finite: return fail("value " + quote({v, p}) + " is not finite");
        case NumError::range:
          return fail("value " + quote({v, p}) + " is out of range for a float");
        case NumError::syntax: return fail("expected \"index:value\" but found " + quote({t, p}));
      }
      if (idx <= prev) {
        if (idx == prev) return fail(duplicate(idx));
        sorted = false;
      }
      prev = idx;
      // Within the slot: this entry's ':' is one the counting pass saw.
      indices_[c_.entries] = static_cast<std::uint32_t>(idx - 1);
      values_[c_.entries] = value;
      ++c_.entries;
    }
    if (!sorted && !sort_row(row_start)) return false;
    // The row is sorted now, so its last index is its largest.
    if (c_.entries > row_start)
      c_.max_index = std::max<std::uint64_t>(c_.max_index, indices_[c_.entries - 1] + 1ull);
    if (c_.entries - row_start > kMaxIndex)
      return fail("a row has more than " + std::to_string(kMaxIndex) + " features");
    labels_[c_.rows] = label;
    ends_[c_.rows] = c_.slot_entry + c_.entries;
    ++c_.rows;
    return true;
  }

  static std::string duplicate(std::uint64_t idx) {
    return "feature index " + std::to_string(idx) + " appears twice in one row";
  }

  // Unsorted rows are legal libsvm; the Dataset contract is ascending indices.
  bool sort_row(std::size_t start) {
    const std::size_t n = c_.entries - start;
    scratch_.resize(n);
    for (std::size_t i = 0; i < n; ++i) scratch_[i] = {indices_[start + i], values_[start + i]};
    std::sort(scratch_.begin(), scratch_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < n; ++i) {
      if (i > 0 && scratch_[i].first == scratch_[i - 1].first)
        return fail(duplicate(scratch_[i].first + 1ull));
      indices_[start + i] = scratch_[i].first;
      values_[start + i] = scratch_[i].second;
    }
    return true;
  }

  Chunk& c_;
  float* labels_;
  std::uint64_t* ends_;  // ends_[r] = offsets[slot_row + r + 1]
  std::uint32_t* indices_;
  float* values_;
  std::vector<std::pair<std::uint32_t, float>> scratch_;
};

// Chunks of about `target` bytes, each ending just after a newline (or at the end).
std::vector<Chunk> split(std::string_view text, std::size_t target) {
  std::vector<Chunk> chunks;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = std::min(text.size(), begin + target);
    if (end < text.size()) {
      std::size_t nl = text.find('\n', end - 1);
      end = nl == std::string_view::npos ? text.size() : nl + 1;
    }
    chunks.emplace_back().text = text.substr(begin, end - begin);
    begin = end;
  }
  return chunks;
}

}  // namespace

Dataset parse_libsvm(std::string_view text, const std::string& name, const LibsvmOptions& options) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark

  // Small inputs are parsed on the calling thread: starting TBB would cost more.
  constexpr std::size_t kMinChunk = std::size_t{1} << 20;
  const bool parallel = options.threads != 1 && text.size() >= 2 * kMinChunk;
  const std::size_t target = std::max(kMinChunk, text.size() / 64 + 1);
  std::vector<Chunk> chunks = parallel ? split(text, target) : split(text, text.size() + 1);

  // Runs fn(chunk index) for every chunk, on TBB's threads when parallel.
  std::optional<detail::TbbSession> tbb;
  if (parallel) tbb.emplace(options.threads);
  auto for_each_chunk = [&](auto&& fn) {
    if (!tbb) {
      for (std::size_t i = 0; i < chunks.size(); ++i) fn(i);
      return;
    }
    tbb->run([&] {
      oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<std::size_t>(0, chunks.size(), 1),
                                tbb->task([&](const auto& r) {
                                  for (std::size_t i = r.begin(); i < r.end(); ++i) fn(i);
                                }));
    });
  };
  for_each_chunk([&](std::size_t i) { count_caps(chunks[i]); });

  std::size_t row_cap = 0, entry_cap = 0;
  for (Chunk& c : chunks) {
    c.slot_row = row_cap;
    c.slot_entry = entry_cap;
    row_cap += c.row_cap;
    entry_cap += c.entry_cap;
  }
  auto s = detail::make_sections(Layout::sparse, 0, row_cap, entry_cap);
  auto storage = MappedBuffer::anonymous(s.end);
  std::byte* base = storage->data();
  const Arrays out{detail::section<float>(base, s.labels),
                   detail::section<std::uint64_t>(base, s.offsets),
                   detail::section<std::uint32_t>(base, s.indices),
                   detail::section<float>(base, s.values)};
  out.offsets[0] = 0;
  for_each_chunk([&](std::size_t i) { ChunkParser(chunks[i], out).run(); });

  // The earliest error is in the first chunk that has one; the chunks before it
  // were parsed to the end, so their line counts are complete.
  std::size_t lines_before = 0, rows = 0, nnz = 0;
  std::uint64_t max_index = 0;
  for (const Chunk& c : chunks) {
    if (c.error_line) throw DataError(name, lines_before + c.error_line, c.error);
    HOGWILD_ENFORCE_LE(c.rows, c.row_cap);
    HOGWILD_ENFORCE_LE(c.entries, c.entry_cap);
    lines_before += c.lines;
    rows += c.rows;
    nnz += c.entries;
    max_index = std::max(max_index, c.max_index);
  }
  if (rows != row_cap || nnz != entry_cap) {
    // Some slot has room to spare (comment or blank lines, qid:): move every chunk
    // down to where it belongs, in order, so that no move overwrites data not yet
    // moved, and give the pages past the new ends back.
    std::size_t row = 0, entry = 0;
    for (const Chunk& c : chunks) {
      if (c.slot_row != row || c.slot_entry != entry) {
        std::memmove(out.labels + row, out.labels + c.slot_row, c.rows * sizeof(float));
        for (std::size_t r = 1; r <= c.rows; ++r)
          out.offsets[row + r] = out.offsets[c.slot_row + r] - c.slot_entry + entry;
        std::memmove(out.indices + entry, out.indices + c.slot_entry,
                     c.entries * sizeof(std::uint32_t));
        std::memmove(out.values + entry, out.values + c.slot_entry, c.entries * sizeof(float));
      }
      row += c.rows;
      entry += c.entries;
    }
    storage->release(s.labels + rows * sizeof(float), s.offsets);
    storage->release(s.offsets + (rows + 1) * sizeof(std::uint64_t), s.indices);
    storage->release(s.indices + nnz * sizeof(std::uint32_t), s.values);
    storage->release(s.values + nnz * sizeof(float), s.end);
  }
  tbb.reset();  // join TBB's threads now: the caller may fork as soon as we return
  storage->seal();
  return Dataset::view(storage, Layout::sparse, rows, static_cast<std::size_t>(max_index),
                       out.labels, out.offsets, out.indices, out.values, name);
}

Dataset read_libsvm(const std::string& path, const LibsvmOptions& options) {
  auto content = detail::FileContent::read(path);
  return parse_libsvm(content.text(), path, options);
}

}  // namespace hogwild
