// libsvm/svmlight text reader. The text is cut into chunks at line boundaries and
// the chunks are parsed in parallel (TBB), each into its own vectors; the results
// are then copied once into the shared mapping of the Dataset. Line numbers in
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

// What one chunk of text became. Offsets are local (the first row starts at 0).
struct Chunk {
  std::string_view text;
  std::vector<float> labels;
  std::vector<std::uint64_t> ends;  // ends[r] = local offset one past row r's last entry
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::uint64_t max_index = 0;  // largest 1-based index seen
  std::size_t lines = 0;        // lines parsed (all of them, unless an error stopped us)
  std::size_t error_line = 0;   // 1-based within the chunk; 0 = no error
  std::string error;
};

inline bool is_blank(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r';
}
// A token ends at a blank or where a comment starts.
inline bool ends_token(char c) noexcept {
  return is_blank(c) || c == '#';
}

class ChunkParser {
 public:
  // Real files spend 10 to 20 bytes on an entry: reserving for one per 8 bytes
  // avoids regrowing, and pages never written cost nothing.
  explicit ChunkParser(Chunk& c) : c_(c) {
    c_.indices.reserve(c_.text.size() / 8 + 16);
    c_.values.reserve(c_.text.size() / 8 + 16);
  }

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

    const std::size_t row_start = c_.indices.size();
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
      c_.indices.push_back(static_cast<std::uint32_t>(idx - 1));
      c_.values.push_back(value);
    }
    if (!sorted && !sort_row(row_start)) return false;
    // The row is sorted now, so its last index is its largest.
    if (c_.indices.size() > row_start)
      c_.max_index = std::max<std::uint64_t>(c_.max_index, c_.indices.back() + 1ull);
    if (c_.indices.size() - row_start > kMaxIndex)
      return fail("a row has more than " + std::to_string(kMaxIndex) + " features");
    c_.labels.push_back(label);
    c_.ends.push_back(c_.indices.size());
    return true;
  }

  static std::string duplicate(std::uint64_t idx) {
    return "feature index " + std::to_string(idx) + " appears twice in one row";
  }

  // Unsorted rows are legal libsvm; the Dataset contract is ascending indices.
  bool sort_row(std::size_t start) {
    const std::size_t n = c_.indices.size() - start;
    scratch_.resize(n);
    for (std::size_t i = 0; i < n; ++i) scratch_[i] = {c_.indices[start + i], c_.values[start + i]};
    std::sort(scratch_.begin(), scratch_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < n; ++i) {
      if (i > 0 && scratch_[i].first == scratch_[i - 1].first)
        return fail(duplicate(scratch_[i].first + 1ull));
      c_.indices[start + i] = scratch_[i].first;
      c_.values[start + i] = scratch_[i].second;
    }
    return true;
  }

  Chunk& c_;
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
  for_each_chunk([&](std::size_t i) { ChunkParser(chunks[i]).run(); });

  // The earliest error is in the first chunk that has one; the chunks before it
  // were parsed to the end, so their line counts are complete.
  std::vector<std::size_t> first_row(chunks.size() + 1, 0), first_entry(chunks.size() + 1, 0);
  std::size_t lines_before = 0;
  std::uint64_t max_index = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    if (c.error_line) throw DataError(name, lines_before + c.error_line, c.error);
    lines_before += c.lines;
    first_row[i + 1] = first_row[i] + c.labels.size();
    first_entry[i + 1] = first_entry[i] + c.indices.size();
    max_index = std::max(max_index, c.max_index);
  }
  const std::size_t rows = first_row.back(), nnz = first_entry.back();

  auto s = detail::make_sections(Layout::sparse, 0, rows, nnz);
  auto storage = MappedBuffer::anonymous(s.end);
  std::byte* base = storage->data();
  auto* labels = detail::section<float>(base, s.labels);
  auto* offsets = detail::section<std::uint64_t>(base, s.offsets);
  auto* indices = detail::section<std::uint32_t>(base, s.indices);
  auto* values = detail::section<float>(base, s.values);
  offsets[0] = 0;
  // Each chunk copies itself into place; the first touch of the shared pages
  // (page faults) is spread over the threads too.
  for_each_chunk([&](std::size_t i) {
    Chunk& c = chunks[i];
    const std::size_t row = first_row[i], at = first_entry[i];
    std::copy(c.labels.begin(), c.labels.end(), labels + row);
    for (std::size_t r = 0; r < c.ends.size(); ++r) offsets[row + r + 1] = at + c.ends[r];
    std::copy(c.indices.begin(), c.indices.end(), indices + at);
    std::copy(c.values.begin(), c.values.end(), values + at);
    c = Chunk{};  // give the memory back as we go
  });
  tbb.reset();  // join TBB's threads now: the caller may fork as soon as we return
  storage->seal();
  return Dataset::view(storage, Layout::sparse, rows, static_cast<std::size_t>(max_index), labels,
                       offsets, indices, values, name);
}

Dataset read_libsvm(const std::string& path, const LibsvmOptions& options) {
  auto content = detail::FileContent::read(path);
  return parse_libsvm(content.text(), path, options);
}

}  // namespace hogwild
