// Rating triples: the MovieLens-style reader on good and malformed input, format
// detection against libsvm, the binary cache, and the low-rank generator.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The message of the DataError that parsing `text` throws, or "(no error)".
std::string parse_error(const std::string& text) {
  try {
    parse_ratings(text, "r.tsv");
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

struct Triple {
  std::uint32_t user, item;
  float rating;
  bool operator==(const Triple&) const = default;
};
std::vector<Triple> triples(const Dataset& d) {
  REQUIRE(d.layout() == Layout::ratings);
  std::vector<Triple> t;
  for (std::size_t r = 0; r < d.rows(); ++r) t.push_back({d.row(r).index[0], d.row(r).index[1], d.label(r)});
  return t;
}

// Overwrites sizeof(T) bytes at `at` in a file.
template <class T>
void patch(const std::string& path, std::size_t at, T value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(reinterpret_cast<const char*>(&value), sizeof value);
}
template <class T>
T peek(const std::string& path, std::size_t at) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  T v{};
  f.read(reinterpret_cast<char*>(&v), sizeof v);
  return v;
}

}  // namespace

TEST_CASE("u.data, ratings.csv and ratings.dat styles parse to the same triples") {
  const std::vector<Triple> expected{{196, 242, 3}, {186, 302, 3.5f}, {0, 7, -1}};
  CHECK(triples(parse_ratings("196\t242\t3\t881250949\n186\t302\t3.5\t891717742\n0\t7\t-1\t5\n", "u.data")) == expected);
  CHECK(triples(parse_ratings("userId,movieId,rating,timestamp\r\n196,242,3,1\r\n186,302,3.5,2\r\n0,7,-1,3\r\n", "c")) == expected);
  CHECK(triples(parse_ratings("196::242::3::881250949\n186::302::3.5::1\n0::7::-1::0", "dat")) == expected);
  CHECK(triples(parse_ratings("\xEF\xBB\xBF# comment\n\n 196  242 3\n186 302 +3.5e0\n \t\n0 7 -1\n", "s")) == expected);
  Dataset d = parse_ratings("196\t242\t3\n186\t302\t3.5\n", "u.data");
  CHECK(d.users() == 197);
  CHECK(d.cols() == 303);
  CHECK(d.nnz() == 4);
  CHECK(d.row(1).nnz == 2);
  CHECK(d.row(1).value[0] == 1.0f);
  Dataset empty = parse_ratings("userId,movieId,rating\n", "h");
  CHECK(empty.rows() == 0);
  CHECK(empty.users() == 0);
  CHECK(parse_ratings("", "e").layout() == Layout::ratings);
}

TEST_CASE("malformed ratings name the file, the line, what was expected and what was found") {
  const std::map<std::string, std::string> cases{
      {"1\t2\t3\n4\t5\n", "r.tsv:2: expected user, item, rating and an optional timestamp (3 or 4 fields) but found 2 fields"},
      {"1 2 3 4 5\n", "r.tsv:1: expected user, item, rating and an optional timestamp (3 or 4 fields) but found 5 fields"},
      {"1\t2\t3\nx\t2\t3\n", "r.tsv:2: expected a user id (a non-negative integer) but found \"x\""},
      {"1,-2,3\n", "r.tsv:1: expected an item id (a non-negative integer) but found \"-2\""},
      {"1,2.5,3\n", "r.tsv:1: expected an item id (a non-negative integer) but found \"2.5\""},
      {"1,,3\n", "r.tsv:1: expected an item id (a non-negative integer) but found \"\""},
      {"1 2 three\n", "r.tsv:1: expected a rating (number) but found \"three\""},
      {"1 2 nan\n", "r.tsv:1: rating \"nan\" is not finite"},
      {"1 2 1e99\n", "r.tsv:1: rating \"1e99\" is out of range for a float"},
      {"1 2 3 noon\n", "r.tsv:1: expected a timestamp (integer) but found \"noon\""},
      {"67108864 2 3\n", "r.tsv:1: user id \"67108864\" is larger than 67108863"},
      {"1 99999999999999999999999 3\n", "r.tsv:1: item id \"99999999999999999999999\" is larger than 67108863"},
      {"user,item\n1,2,3\n", "r.tsv:1: a header line needs 3 or 4 fields"},
      {"1,2,3\nuser,item,rating\n", "r.tsv:2: expected a user id"},
      {"1 2:1 3:1\n", "r.tsv:1: expected an item id (a non-negative integer) but found \"2:1\""},
  };
  for (const auto& [text, message] : cases) {
    const std::string input = text;  // (clang 14 captures no structured binding)
    CAPTURE(input);
    CHECK(contains(parse_error(text), message));
  }
  CHECK(contains(parse_error(std::string("1\t2\t3\n\0\n", 8)), "r.tsv:2: expected user, item, rating"));
  CHECK(parse_ratings("67108863\t0\t1\n", "max").users() == 67108864);  // the largest id is fine
}

TEST_CASE("detection: ratings files are recognised, libsvm files never taken for ratings") {
  test::TempDir dir;
  const std::map<std::string, FileFormat> cases{
      {"196\t242\t3\t881250949\n", FileFormat::ratings},
      {"userId,movieId,rating,timestamp\n1,2,3,4\n", FileFormat::ratings},
      {"1::2::5::978300760\n", FileFormat::ratings},
      {"# ratings\n\n1 2 3\n", FileFormat::ratings},
      {"1 1:0.5 7:1\n0 2:1\n", FileFormat::libsvm},
      {"+1 3:1 4:2 5:3\n", FileFormat::libsvm},
      {"1\n0\n1\n", FileFormat::libsvm},               // labels only, no features
      {"3 qid:1 1:2 2:3\n", FileFormat::libsvm},
      {"# 1 2 3\n1 1:1 2:1 3:1\n", FileFormat::libsvm},
      {"2 3 1:4\n", FileFormat::libsvm},                // malformed libsvm stays libsvm
      {"label,f1,f2\n1,2,3\n", FileFormat::libsvm},     // a header that names no user
      {"", FileFormat::libsvm},
  };
  int n = 0;
  for (const auto& [text, format] : cases) {
    const std::string input = text;  // (clang 14 captures no structured binding)
    CAPTURE(input);
    const std::string path = dir.file(std::to_string(n++) + ".txt");
    test::write_text(path, text);
    CHECK(detect_format(path) == format);
  }
  test::write_gzip(dir.file("r.gz"), "1\t2\t3\n4\t5\t1.5\n");
  CHECK(detect_format(dir.file("r.gz")) == FileFormat::ratings);
  Dataset d = load_dataset(dir.file("r.gz"));
  CHECK(d.layout() == Layout::ratings);
  CHECK(triples(d) == std::vector<Triple>{{1, 2, 3}, {4, 5, 1.5f}});
  CHECK_THROWS_AS(load_dataset(dir.file("r.gz"), "labels"), ConfigError);
}

TEST_CASE("ratings round-trip through text and the cache; a damaged ratings cache is rejected") {
  test::TempDir dir;
  RatingsGenerateOptions o;
  o.users = 50;
  o.items = 30;
  o.ratings = 500;
  Dataset d = generate_ratings(o).train;
  write_ratings(d, dir.file("r.tsv.gz"));
  CHECK(triples(read_ratings(dir.file("r.tsv.gz"))) == triples(d));
  const std::string cache = dir.file("r.cache");
  write_cache(d, cache);
  Dataset c = open_cache(cache);
  CHECK(c.layout() == Layout::ratings);
  CHECK(c.users() == d.users());
  CHECK(c.cols() == d.cols());
  CHECK(triples(c) == triples(d));
  CHECK(triples(load_dataset(cache)) == triples(d));

  // Header: offsets_offset at byte 48, indices_offset at 56 (src/data/cache.cpp).
  const auto offsets_at = peek<std::uint64_t>(cache, 48), indices_at = peek<std::uint64_t>(cache, 56);
  auto damaged = [&](auto&& damage) {
    const std::string bad = dir.file("bad.cache");
    std::filesystem::copy_file(cache, bad, std::filesystem::copy_options::overwrite_existing);
    damage(bad);
    try {
      open_cache(bad);
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(contains(damaged([&](auto& p) { patch<std::uint32_t>(p, indices_at + 4, 1000); }),
                 "row 1: item id 1000 >= cols " + std::to_string(d.cols())));
  CHECK(contains(damaged([&](auto& p) { patch<std::uint32_t>(p, indices_at + 8, 1u << 30); }),
                 "row 2: user id 1073741824 > 67108863"));
  CHECK(contains(damaged([&](auto& p) { patch<std::uint64_t>(p, offsets_at + 8, 3); }),
                 "row 1: a rating row has 3 entries, not 2"));
}

TEST_CASE("generator: same seed same data; ids in range; popularity skewed; mean 3, variance 1 + noise^2") {
  RatingsGenerateOptions o;
  o.users = 400;
  o.items = 300;
  o.rank = 8;
  o.ratings = 40000;
  o.test_ratings = 4000;
  o.noise = 0.5;
  o.seed = 9;
  auto a = generate_ratings(o), b = generate_ratings(o);
  CHECK(triples(a.train) == triples(b.train));
  CHECK(triples(a.test) == triples(b.test));
  CHECK(a.test.rows() == 4000);
  o.seed = 10;
  CHECK(triples(generate_ratings(o).train) != triples(a.train));

  std::vector<std::size_t> per_user(o.users + 1);
  double sum = 0, sq = 0;
  bool in_range = true;
  for (const Triple& t : triples(a.train)) {
    in_range &= t.user >= 1 && t.user <= o.users && t.item >= 1 && t.item <= o.items;
    if (!in_range) break;
    ++per_user[t.user];
    sum += t.rating;
    sq += static_cast<double>(t.rating) * t.rating;
  }
  REQUIRE(in_range);
  const double n = 40000, mean = sum / n, var = sq / n - mean * mean;
  CHECK(mean == doctest::Approx(3.0).epsilon(0.05));
  CHECK(var == doctest::Approx(1.0 + 0.25).epsilon(0.2));
  // Zipf 0.5 over 400 users: the busiest user has about 20x the ratings of the quietest.
  std::sort(per_user.begin() + 1, per_user.end());
  CHECK(per_user.back() > 8 * std::max<std::size_t>(per_user[1], 1));

  o.zipf_exponent = 0;  // uniform: no user far above the average of 100
  std::fill(per_user.begin(), per_user.end(), 0);
  for (const Triple& t : triples(generate_ratings(o).train)) ++per_user[t.user];
  CHECK(*std::max_element(per_user.begin(), per_user.end()) < 160);
}

TEST_CASE("generator: invalid options are ConfigErrors") {
  auto bad = [](auto&& change) {
    RatingsGenerateOptions o;
    change(o);
    CHECK_THROWS_AS(generate_ratings(o), ConfigError);
  };
  bad([](auto& o) { o.users = 0; });
  bad([](auto& o) { o.items = std::size_t{kMaxRatingId} + 1; });
  bad([](auto& o) { o.rank = 0; });
  bad([](auto& o) { o.ratings = 0; });
  bad([](auto& o) { o.noise = -1; });
  bad([](auto& o) { o.noise = std::nan(""); });
  bad([](auto& o) { o.zipf_exponent = 11; });
  bad([](auto& o) { o.users = 1 << 20, o.items = 1 << 20, o.rank = 65; });  // more than 2^27 factors
}

TEST_CASE("hogwild_data: generate --kind ratings, info, convert; bad ratings exit 2 with file:line") {
  test::TempDir dir;
  const auto data = test::hogwild_data_path();
  auto r = test::run({data, "generate", "--kind", "ratings", "--users", "40", "--items", "20", "--rank", "3",
                      "--ratings", "1000", "--noise", "0.2", "--seed", "4", "--out", dir.file("g.tsv"),
                      "--test-out", dir.file("g.test.tsv")});
  CAPTURE(r.out);
  REQUIRE(r.exit_code == 0);
  RatingsGenerateOptions o;
  o.users = 40, o.items = 20, o.rank = 3, o.ratings = 1000, o.test_ratings = 100, o.noise = 0.2, o.seed = 4;
  auto expected = generate_ratings(o);
  CHECK(triples(read_ratings(dir.file("g.tsv"))) == triples(expected.train));
  CHECK(triples(read_ratings(dir.file("g.test.tsv"))) == triples(expected.test));

  r = test::run({data, "convert", dir.file("g.tsv"), "--out", dir.file("g.cache")});
  REQUIRE(r.exit_code == 0);
  CHECK(triples(open_cache(dir.file("g.cache"))) == triples(expected.train));
  r = test::run({data, "info", dir.file("g.cache")});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "binary cache, ratings"));
  CHECK(contains(r.out, "users:      " + std::to_string(expected.train.users())));

  test::write_text(dir.file("bad.csv"), "userId,movieId,rating,timestamp\n1,2,3,4\n1,2,x,4\n");
  r = test::run({data, "info", dir.file("bad.csv")});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "hogwild_data: error: " + dir.file("bad.csv") +
                            ":3: expected a rating (number) but found \"x\""));
  r = test::run({data, "generate", "--kind", "ratings", "--users", "0", "--out", dir.file("x.tsv")});
  CHECK(r.exit_code == 2);
}
