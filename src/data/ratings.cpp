// Rating triples (MovieLens u.data, ratings.csv, ratings.dat) read into a Dataset of
// Layout::ratings. One pass on the calling thread: the work per line is small and
// a parse of MovieLens 25M stays a few seconds. Ids are kept raw and bounded by
// kMaxRatingId, so no id in a file can make anything allocate more than that bound
// implies; the arrays grow with the lines actually read.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

#include "data/file_io.hpp"
#include "data/sections.hpp"
#include "data/text.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace {

using detail::NumError;
using detail::quote;

constexpr const char* kExpected = "user, item, rating and an optional timestamp";

// The fields of one line (at most 5 kept: one more than allowed, to report it).
struct Fields {
  std::array<std::string_view, 5> f;
  std::size_t n = 0;
};

// Splits on "::" if the line has it, else on commas if it has one, else on runs of
// tabs and spaces. The line has no '\n' and no trailing '\r'.
Fields split(std::string_view line) {
  Fields out;
  auto push = [&](std::string_view field) {
    if (out.n < out.f.size()) out.f[out.n] = field;
    ++out.n;
  };
  std::string_view sep = line.find("::") != std::string_view::npos ? "::"
                         : line.find(',') != std::string_view::npos ? ","
                                                                     : "";
  if (!sep.empty()) {
    for (std::size_t at = 0;;) {
      const std::size_t next = line.find(sep, at);
      std::string_view field = line.substr(at, next == std::string_view::npos ? next : next - at);
      while (!field.empty() && (field.front() == ' ' || field.front() == '\t')) field.remove_prefix(1);
      while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.remove_suffix(1);
      push(field);
      if (next == std::string_view::npos) return out;
      at = next + sep.size();
    }
  }
  for (std::size_t at = 0; at < line.size();) {
    at = line.find_first_not_of(" \t", at);
    if (at == std::string_view::npos) break;
    const std::size_t end = std::min(line.find_first_of(" \t", at), line.size());
    push(line.substr(at, end - at));
    at = end;
  }
  return out;
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Blank and '#' lines carry no data. Returns the line without its '\r'.
std::string_view trim_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}
bool no_data(std::string_view line) {
  const std::size_t at = line.find_first_not_of(" \t");
  return at == std::string_view::npos || line[at] == '#';
}

// A header is a first data line that does not start with a digit.
bool is_header(const Fields& x) {
  return x.n > 0 && !x.f[0].empty() && !(x.f[0][0] >= '0' && x.f[0][0] <= '9');
}

class LineParser {
 public:
  // Empty string: the line is good and its values are in user/item/rating.
  std::string parse(std::string_view line) {
    const Fields x = split(line);
    if (x.n < 3 || x.n > 4)
      return "expected " + std::string(kExpected) + " (3 or 4 fields) but found " +
             std::to_string(x.n) + " field" + (x.n == 1 ? "" : "s") + " in " + quote(line);
    std::string e = id(x.f[0], "user", user);
    if (e.empty()) e = id(x.f[1], "item", item);
    if (!e.empty()) return e;
    switch (detail::parse_float(x.f[2].data(), x.f[2].data() + x.f[2].size(), rating)) {
      case NumError::none: break;
      case NumError::not_finite: return "rating " + quote(x.f[2]) + " is not finite";
      case NumError::range: return "rating " + quote(x.f[2]) + " is out of range for a float";
      case NumError::syntax: return "expected a rating (number) but found " + quote(x.f[2]);
    }
    if (x.n == 4) {
      std::string_view t = x.f[3];
      if (!t.empty() && t.front() == '-') t.remove_prefix(1);
      if (!is_digits(t)) return "expected a timestamp (integer) but found " + quote(x.f[3]);
    }
    return {};
  }

  std::uint32_t user = 0, item = 0;
  float rating = 0;

 private:
  static std::string id(std::string_view s, const char* what, std::uint32_t& out) {
    if (!is_digits(s))
      return std::string("expected ") + (what[0] == 'i' ? "an " : "a ") + what +
             " id (a non-negative integer) but found " +
             quote(s);
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || v > kMaxRatingId)
      return std::string(what) + " id " + quote(s) + " is larger than " +
             std::to_string(kMaxRatingId) + " (ids are kept as they are: remap large ids)";
    out = static_cast<std::uint32_t>(v);
    return {};
  }
};

// Calls fn(line, number) for every line of text; stops when fn returns false.
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  std::size_t number = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t eol = text.find('\n', at);
    if (eol == std::string_view::npos) eol = text.size();
    if (!fn(trim_cr(text.substr(at, eol - at)), ++number)) return;
    at = eol + 1;
  }
}

}  // namespace

Dataset parse_ratings(std::string_view text, const std::string& name) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  std::vector<float> labels;
  std::vector<std::uint32_t> users, items;
  const std::size_t guess = text.size() / 16 + 1;  // u.data lines are about 20 bytes
  labels.reserve(guess);
  users.reserve(guess);
  items.reserve(guess);
  LineParser p;
  bool first = true;
  for_each_line(text, [&](std::string_view line, std::size_t number) {
    if (no_data(line)) return true;
    if (first) {
      first = false;
      const Fields h = split(line);
      if (is_header(h)) {
        if (h.n < 3 || h.n > 4)
          throw DataError(name, number,
                          "a header line needs 3 or 4 fields (" + std::string(kExpected) +
                              ") but has " + std::to_string(h.n) + ": " + quote(line));
        return true;
      }
    }
    std::string error = p.parse(line);
    if (!error.empty()) throw DataError(name, number, error);
    labels.push_back(p.rating);
    users.push_back(p.user);
    items.push_back(p.item);
    return true;
  });
  return Dataset::ratings(labels, users, items, name);
}

Dataset read_ratings(const std::string& path) {
  auto content = detail::FileContent::read(path);
  return parse_ratings(content.text(), path);
}

bool looks_like_ratings(std::string_view head) {
  if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
  bool verdict = false;
  for_each_line(head, [&](std::string_view line, std::size_t) {
    if (no_data(line)) return true;
    const Fields x = split(line);
    if (is_header(x)) {  // "userId,movieId,rating,timestamp" and the like
      std::string lower(x.f[0]);
      for (char& c : lower) c = static_cast<char>(c | 0x20);
      verdict = (x.n == 3 || x.n == 4) && lower.find("user") != std::string::npos;
      return false;
    }
    // libsvm needs "index:value" tokens; "::" is the ratings.dat separator. Three or
    // four fields of that shape are ratings even where one is bad ("1 2 nan"), so
    // that the ratings parser says what is wrong with the line, not libsvm's; a
    // libsvm row of a label and a comment ("1 # no features") is not.
    const bool colon = line.find(':') != std::string_view::npos;
    const bool comment = line.find('#') != std::string_view::npos;
    verdict = (!colon || line.find("::") != std::string_view::npos) &&
              ((!comment && (x.n == 3 || x.n == 4)) || LineParser().parse(line).empty());
    return false;
  });
  return verdict;
}

void write_ratings(const Dataset& d, const std::string& path) {
  HOGWILD_ENFORCE(d.layout() == Layout::ratings, "write_ratings needs a ratings dataset");
  detail::TextWriter out(path);
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const RowView x = d.row(r);
    out.number(x.index[0]).put('\t').number(x.index[1]).put('\t').number(d.label(r));
    out.end_line();
  }
  out.commit();
}

}  // namespace hogwild
