// libsvm/svmlight reader: every form real files take, every malformed line reported
// with its exact line number, gzip, the parallel parse, and the SpamAssassin files.
#include <doctest/doctest.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

Dataset parse(std::string_view text, unsigned threads = 1) {
  return parse_libsvm(text, "t.svm", LibsvmOptions{threads});
}

std::vector<std::uint32_t> indices(const Dataset& d, std::size_t r) {
  RowView row = d.row(r);
  return {row.index, row.index + row.nnz};
}
std::vector<float> values(const Dataset& d, std::size_t r) {
  RowView row = d.row(r);
  return {row.value, row.value + row.nnz};
}
std::vector<float> labels(const Dataset& d) {
  return {d.labels().begin(), d.labels().end()};
}

// Parsing `text` must fail at `line` with a message that contains `part`.
void check_error(const std::string& text, std::size_t line, const std::string& part,
                 unsigned threads = 1) {
  CAPTURE(text);
  try {
    parse(text, threads);
    FAIL("parsed without an error");
  } catch (const DataError& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(e.line() == line);
    CHECK(e.file() == "t.svm");
    CHECK(msg.rfind("t.svm:" + std::to_string(line) + ": ", 0) == 0);
    CHECK(msg.find(part) != std::string::npos);
    CHECK(e.exit_code() == kExitBadInput);
  }
}

bool same(const Dataset& a, const Dataset& b) {
  auto eq = [](auto x, auto y) { return std::equal(x.begin(), x.end(), y.begin(), y.end()); };
  return a.rows() == b.rows() && a.cols() == b.cols() && a.nnz() == b.nnz() &&
         eq(a.labels(), b.labels()) && eq(a.offsets(), b.offsets()) &&
         eq(a.indices(), b.indices()) && eq(a.values(), b.values());
}

int thread_count() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}
// Threads before any test ran. ThreadSanitizer starts a thread of its own at the
// first pthread_create, so one thread is started (and joined) before counting.
const int kThreadsAtStart = [] {
  std::thread([] {}).join();
  return thread_count();
}();

// About `mb` MB of valid libsvm text, ~100 bytes a line.
std::string big_text(std::size_t mb) {
  std::string t;
  for (std::size_t r = 0; t.size() < mb << 20; ++r)
    t += std::to_string(r % 2) + " " + std::to_string(r % 97 + 1) + ":0.5 " +
         std::to_string(r % 89 + 200) + ":1e-3 " + std::to_string(r % 13 + 400) +
         ":2.5E+02 777:0.125 1000:-3 # row " + std::to_string(r) + "\n";
  return t;
}

// The message of the E that f() throws; "(no error)" if it returns.
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

}  // namespace

TEST_CASE("a plain file parses into CSR with 0-based indices") {
  Dataset d = parse("1 1:0.5 3:2\n0 2:1\n");
  CHECK(d.layout() == Layout::sparse);
  CHECK(d.rows() == 2);
  CHECK(d.cols() == 3);
  CHECK(d.nnz() == 3);
  CHECK(labels(d) == std::vector<float>{1, 0});
  CHECK(std::vector<std::uint64_t>(d.offsets().begin(), d.offsets().end()) ==
        std::vector<std::uint64_t>{0, 2, 3});
  CHECK(indices(d, 0) == std::vector<std::uint32_t>{0, 2});
  CHECK(values(d, 0) == std::vector<float>{0.5f, 2.0f});
  CHECK(indices(d, 1) == std::vector<std::uint32_t>{1});
  CHECK(values(d, 1) == std::vector<float>{1.0f});
  CHECK(d.source() == "t.svm");
}

TEST_CASE("labels: 0/1, -1/+1, class numbers, floats, exponents") {
  Dataset d = parse("+1 1:1\n-1 1:1\n0 1:1\n3 1:1\n0.25 1:1\n1e0 1:1\n-2.5E-1 1:1\n");
  CHECK(labels(d) == std::vector<float>{1, -1, 0, 3, 0.25f, 1, -0.25f});
}

TEST_CASE("qid, comments, CRLF, blank lines, tabs, trailing blanks, scientific notation") {
  const std::string text =
      "# a header comment\r\n"
      "\r\n"
      "1 qid:3 1:1e-3 2:2.5E+02 # a trailing comment\r\n"
      "   \t  \n"
      "0\t4:-1.5   7:+2 \t \n"
      "  # an indented comment\n"
      "1 # a row without features\n"
      "-1 2:0";  // no final newline; an explicit zero is kept
  Dataset d = parse(text);
  REQUIRE(d.rows() == 4);
  CHECK(d.cols() == 7);
  CHECK(labels(d) == std::vector<float>{1, 0, 1, -1});
  CHECK(indices(d, 0) == std::vector<std::uint32_t>{0, 1});
  CHECK(values(d, 0) == std::vector<float>{1e-3f, 250.0f});
  CHECK(indices(d, 1) == std::vector<std::uint32_t>{3, 6});
  CHECK(values(d, 1) == std::vector<float>{-1.5f, 2.0f});
  CHECK(d.row(2).nnz == 0);
  CHECK(indices(d, 3) == std::vector<std::uint32_t>{1});
  CHECK(values(d, 3) == std::vector<float>{0.0f});
}

TEST_CASE("unsorted indices are sorted with their values") {
  Dataset d = parse("1 5:5 2:2 9:9 1:1\n");
  CHECK(indices(d, 0) == std::vector<std::uint32_t>{0, 1, 4, 8});
  CHECK(values(d, 0) == std::vector<float>{1, 2, 5, 9});
  CHECK(d.cols() == 9);
}

TEST_CASE("edge values: the largest index, underflow to zero, a byte order mark") {
  Dataset d = parse(
      "\xEF\xBB\xBF"
      "1 4294967295:1 7:1e-50\n");
  CHECK(d.cols() == 4294967295u);
  CHECK(indices(d, 0) == std::vector<std::uint32_t>{6, 4294967294u});
  CHECK(values(d, 0) == std::vector<float>{0.0f, 1.0f});
}

TEST_CASE("empty and comment-only input gives an empty dataset") {
  for (const char* text : {"", "\n\n", "# nothing\n  # here\r\n"}) {
    Dataset d = parse(text);
    CHECK(d.empty());
    CHECK(d.nnz() == 0);
    CHECK(d.cols() == 0);
    CHECK(d.offsets().size() == 1);
  }
}

TEST_CASE("malformed lines name the file, the exact line, what was expected and found") {
  check_error("1 1:1\nabc 1:1\n", 2, "expected a label (number) but found \"abc\"");
  check_error("1 1:1\n\n1 12-3\n", 3, "expected \"index:value\" but found \"12-3\"");
  check_error("1 0:1\n", 1, "feature index 0: libsvm indices are 1-based");
  check_error("1 1:1\n1 4294967296:1\n", 2, "index 4294967296 is out of range");
  check_error("1 99999999999999999999999:1\n", 1, "is out of range");
  check_error("1 1:nan\n", 1, "value \"nan\" is not finite");
  check_error("1 1:-inf\n", 1, "value \"-inf\" is not finite");
  check_error("1 1:1e40\n", 1, "value \"1e40\" is out of range");
  check_error("nan 1:1\n", 1, "label \"nan\" is not finite");
  check_error("1 2:1 2:3\n", 1, "feature index 2 appears twice");
  check_error("1 3:1 1:1 3:2\n", 1, "feature index 3 appears twice");
  check_error("1 1:\n", 1, "expected \"index:value\" but found \"1:\"");
  check_error("1 1:abc\n", 1, "expected \"index:value\" but found \"1:abc\"");
  check_error("1 :5\n", 1, "expected \"index:value\" but found \":5\"");
  check_error("1 -3:1\n", 1, "expected \"index:value\" but found \"-3:1\"");
  check_error("1 1:2:3\n", 1, "expected \"index:value\" but found \"1:2:3\"");
  check_error("1 1:+-2\n", 1, "expected \"index:value\" but found \"1:+-2\"");
  check_error("1:0.5 2:1\n", 1, "expected a label (number) but found \"1:0.5\"");
  check_error("1 1:1 abc\n", 1, "found \"abc\"");
  check_error("1 1:1\r\n1 1:1\r\nx 1:1\r\n", 3, "found \"x\"");
  check_error("# c\n\n  # c\n1 1:1\n1 1:1 # c\n\n1 1:x\n", 7, "found \"1:x\"");
}

TEST_CASE("every value parses to the float std::from_chars gives") {
  // Short decimals take a fast path in the parser; this compares it, and the general
  // path, with std::from_chars on many shapes: signs, leading zeros, 1 to 12 digits,
  // the point anywhere, exponents.
  std::uint64_t x = 12345;
  auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull, x >> 33; };
  std::vector<std::string> tokens;
  std::string text;
  for (int row = 0; row < 2000; ++row) {
    text += "1";
    for (int j = 1; j <= 50; ++j) {
      std::string v = next() % 4 == 0 ? "-" : "";
      const int digits = 1 + static_cast<int>(next() % 12),
                point = static_cast<int>(next() % (digits + 2));
      for (int i = 0; i < digits; ++i) {
        if (i == point) v += '.';
        v += static_cast<char>('0' + next() % 10);
      }
      if (next() % 8 == 0) {
        v += 'e';
        v += std::to_string(static_cast<int>(next() % 21) - 10);
      }
      tokens.push_back(v);
      text += ' ';
      text += std::to_string(j);
      text += ':';
      text += v;
    }
    text += "\n";
  }
  Dataset d = parse(text);
  REQUIRE(d.nnz() == tokens.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    float expected = 0;
    std::from_chars(tokens[i].data(), tokens[i].data() + tokens[i].size(), expected);
    if (std::memcmp(&expected, &d.values()[i], sizeof expected) != 0) {
      ++mismatches;
      MESSAGE(tokens[i] << " parsed as " << d.values()[i] << ", from_chars gives " << expected);
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("long tokens are shortened in messages") {
  check_error("1 " + std::string(500, 'z') + "\n", 1, "zzz...\"");
}

TEST_CASE("the earliest error wins, with its global line number, in a parallel parse") {
  std::string text = big_text(8);  // well above the size where the parse goes parallel
  // Line numbers: count newlines up to a byte position.
  auto line_at = [&](std::size_t pos) {
    return static_cast<std::size_t>(std::count(text.begin(), text.begin() + pos, '\n')) + 1;
  };
  auto break_line_at = [&](std::size_t pos) {
    pos = text.find('\n', pos) + 1;  // start of the next line
    text[pos] = 'x';                 // its label "0" or "1" becomes "x"
    return line_at(pos);
  };
  const std::size_t late = break_line_at(text.size() * 7 / 8);
  check_error(text, late, "expected a label (number) but found \"x", 2);
  check_error(text, late, "expected a label (number) but found \"x", 1);
  const std::size_t early = break_line_at(text.size() / 3);
  REQUIRE(early < late);
  check_error(text, early, "expected a label", 2);
  check_error(text, early, "expected a label", 0);
}

TEST_CASE("a parallel parse equals a one-thread parse, and leaves no TBB thread behind") {
  const std::string text = big_text(6);
  Dataset one = parse(text, 1);
  Dataset two = parse(text, 2);
  Dataset all = parse(text, 0);
  CHECK(one.rows() > 50000);
  CHECK(same(one, two));
  CHECK(same(one, all));
  // The trainer forks after loading: TBB's workers must have been joined.
  CHECK(thread_count() == kThreadsAtStart);
}

TEST_CASE("a parallel parse of text with qid, comments and blank lines everywhere") {
  // Comment and blank lines, qid: and colons in comments make a chunk's count of
  // lines and colons overshoot its rows and entries: the parse must close the gaps.
  const std::string plain = big_text(6);
  std::string noisy;
  std::size_t pos = 0;
  for (std::size_t line = 0; pos < plain.size(); ++line) {
    const std::size_t eol = plain.find('\n', pos);
    std::string row = plain.substr(pos, eol - pos);
    pos = eol + 1;
    if (line % 7 == 0) noisy += "# at 12:30:45, a:b c:d\n";
    if (line % 11 == 0) noisy += "\r\n  \t\n";
    if (line % 5 == 0) row.insert(row.find(' '), " qid:" + std::to_string(line));
    noisy += row + (line % 3 == 0 ? " # x:y\n" : "\n");
  }
  noisy += "# the end: no rows after this\n\n";
  Dataset expected = parse(plain, 1);
  CHECK(same(parse(noisy, 1), expected));
  CHECK(same(parse(noisy, 2), expected));
  CHECK(same(parse(noisy, 0), expected));
  CHECK(thread_count() == kThreadsAtStart);
}

TEST_CASE("files: plain, gzip, concatenated gzip members, write_libsvm round trip") {
  test::TempDir dir;
  const std::string text = "1 1:0.5 3:2\n0 2:1\n";
  test::write_text(dir.file("a.svm"), text);
  test::write_gzip(dir.file("a.svm.gz"), text);
  Dataset plain = read_libsvm(dir.file("a.svm"));
  Dataset gz = read_libsvm(dir.file("a.svm.gz"));
  CHECK(same(plain, gz));
  CHECK(same(plain, parse(text)));
  CHECK(plain.source() == dir.file("a.svm"));
  CHECK(read_file_maybe_gz(dir.file("a.svm.gz")) == text);
  CHECK(detect_format(dir.file("a.svm.gz")) == FileFormat::libsvm);

  // The gzip magic decides, not the name: a gzip'ed file without ".gz" still reads.
  test::write_gzip(dir.file("noext"), text);
  CHECK(same(read_libsvm(dir.file("noext")), plain));

  // `cat a.gz b.gz > ab.gz` is one valid gzip file.
  test::write_gzip(dir.file("b.gz"), "1 7:7\n");
  test::write_text(dir.file("ab.gz"),
                   test::read_text(dir.file("a.svm.gz")) + test::read_text(dir.file("b.gz")));
  Dataset ab = read_libsvm(dir.file("ab.gz"));
  CHECK(ab.rows() == 3);
  CHECK(ab.cols() == 7);

  // Whatever write_libsvm writes, read_libsvm reads back bit for bit (shortest
  // round-trip floats), gzip'ed or not.
  Dataset odd = parse("0.25 1:0.1 2:3.4028235e38 5:1e-45\n-1 3:-0.3333333\n7\n");
  write_libsvm(odd, dir.file("odd.svm"));
  write_libsvm(odd, dir.file("odd.svm.gz"));
  CHECK(same(read_libsvm(dir.file("odd.svm")), odd));
  CHECK(same(read_libsvm(dir.file("odd.svm.gz")), odd));
  CHECK(test::read_text(dir.file("odd.svm")).rfind("0.25 1:0.1 ", 0) == 0);
  CHECK(test::read_text(dir.file("odd.svm.gz")).rfind("\x1f\x8b", 0) == 0);

  // An empty file is zero rows; deciding whether that is an error is the caller's job.
  test::write_text(dir.file("empty.svm"), "");
  CHECK(read_libsvm(dir.file("empty.svm")).empty());
}

TEST_CASE("damaged gzip and missing files give clear errors") {
  test::TempDir dir;
  std::string text;
  for (int r = 0; r < 20000; ++r)
    text += std::to_string(r % 2) + " " + std::to_string(r + 1) + ":0.5\n";
  test::write_gzip(dir.file("ok.gz"), text);
  const std::string gz = test::read_text(dir.file("ok.gz"));

  std::string corrupt = gz;
  for (std::size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i)
    corrupt[i] = static_cast<char>(~corrupt[i]);
  test::write_text(dir.file("corrupt.svm.gz"), corrupt);
  std::string msg = error_of<DataError>([&] { read_libsvm(dir.file("corrupt.svm.gz")); });
  CHECK_MESSAGE(contains(msg, dir.file("corrupt.svm.gz") + ": corrupt gzip stream ("), msg);

  test::write_text(dir.file("short.svm.gz"), gz.substr(0, gz.size() / 2));
  msg = error_of<DataError>([&] { read_libsvm(dir.file("short.svm.gz")); });
  CHECK_MESSAGE(contains(msg, "short.svm.gz: truncated gzip stream"), msg);

  test::write_text(dir.file("junk.svm.gz"), gz + "junk");
  msg = error_of<DataError>([&] { read_libsvm(dir.file("junk.svm.gz")); });
  CHECK_MESSAGE(contains(msg, "unexpected bytes after the end of the gzip data"), msg);

  msg = error_of<IoError>([&] { read_libsvm(dir.file("missing.svm")); });
  CHECK_MESSAGE(contains(msg, "cannot open " + dir.file("missing.svm") + ": No such file"), msg);
  CHECK_THROWS_AS(read_libsvm(dir.path().string()), IoError);
}

TEST_CASE("SpamAssassin: the real files parse to their published counts" * doctest::test_suite("shared_data")) {
  auto shared = test::shared_data();
  if (!shared) return;
  const std::string train = (*shared / "spamassassin" / "spam.train.svm.gz").string();
  const std::string test_file = (*shared / "spamassassin" / "spam.test.svm.gz").string();

  Dataset d = read_libsvm(train);
  CHECK(d.rows() == 4810);
  CHECK(d.nnz() == 745925);
  CHECK(d.cols() <= (1u << 20) + 1);
  DatasetStats st = describe(d);
  REQUIRE(st.label_counts.size() == 2);
  CHECK(st.label_counts[0] == std::pair<float, std::size_t>{0.0f, 3309});
  CHECK(st.label_counts[1] == std::pair<float, std::size_t>{1.0f, 1501});
  CHECK(same(d, read_libsvm(train, LibsvmOptions{1})));

  Dataset t = read_libsvm(test_file);
  CHECK(t.rows() == 1236);
  CHECK(t.nnz() == 184567);
  std::size_t empty_rows = 0;
  for (std::size_t r = 0; r < t.rows(); ++r) empty_rows += t.row(r).nnz == 0;
  CHECK(empty_rows == 1);
  CHECK(thread_count() == kThreadsAtStart);
}
