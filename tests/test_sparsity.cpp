// hogwild_data stats: the Hogwild! statistics against hand-computed hypergraphs,
// against brute force on generated data, against SpamAssassin's figures measured
// by hand (the figures are in the test), and the CLI.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/sparsity.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

// Rows given as their feature lists, values 1.
Dataset rows_of(const std::vector<std::vector<std::uint32_t>>& rows, std::size_t cols) {
  std::vector<float> labels, values;
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> indices;
  for (const auto& r : rows) {
    labels.push_back(static_cast<float>(labels.size() % 3));
    for (auto j : r) {
      indices.push_back(j);
      values.push_back(1.0f);
    }
    offsets.push_back(indices.size());
  }
  return Dataset::sparse(labels, offsets, indices, values, cols, "rows");
}

// The statistics by their definitions, over every pair of rows: rho and the
// average conflict degree.
std::pair<double, double> brute_force(const Dataset& d) {
  std::vector<std::vector<std::uint32_t>> e;
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const RowView x = d.row(r);
    if (x.nnz > 0) e.emplace_back(x.index, x.index + x.nnz);
  }
  const std::size_t m = e.size();
  std::size_t widest = 0, meetings = 0;
  for (std::size_t a = 0; a < m; ++a) {
    std::size_t met = 0;
    for (std::size_t b = 0; b < m; ++b) {
      std::vector<std::uint32_t> both;
      std::set_intersection(e[a].begin(), e[a].end(), e[b].begin(), e[b].end(),
                            std::back_inserter(both));
      met += !both.empty();
    }
    widest = std::max(widest, met);
    meetings += met - 1;
  }
  return {double(widest) / double(m), double(meetings) / double(m)};
}

}  // namespace

TEST_CASE("stats: a hypergraph worked by hand") {
  // Updates {0,1} {1,2} {3} {0,3}: degrees 2 2 1 2 of m = 4; N(e) = 3 2 2 3.
  const Dataset d = rows_of({{0, 1}, {1, 2}, {3}, {0, 3}, {}}, 5);
  SparsityOptions o;
  o.pairs = 400000;
  const auto s = sparsity_stats(d, o);
  CHECK(s.updates == 4);
  CHECK(s.empty == 1);
  CHECK(s.coordinates == 4);
  CHECK(s.omega == 2);
  CHECK(s.mean_size == doctest::Approx(1.75));
  CHECK(s.delta == doctest::Approx(0.5));
  CHECK(s.busiest == "feature 0");
  REQUIRE(s.rho.has_value());
  CHECK(*s.rho == doctest::Approx(0.75));
  CHECK(s.rho_upper == doctest::Approx(0.75));
  CHECK(s.kappa == doctest::Approx(0.8125));  // (1/4 + 1/4 + 1/16 + 1/4)
  // Conflict degree 6/4 of 3 others: P = 0.5.
  CHECK(std::abs(s.p_conf - 0.5) < 4 * s.p_conf_se + 1e-9);
  CHECK(s.conflict_degree == doctest::Approx(1.5).epsilon(0.02));
  CHECK(s.conflict_degree_upper == doctest::Approx(1.5));  // (2+2+0+2)/4
  CHECK(s.bias_coordinates == 1);
  REQUIRE(s.hot.size() == 4);
  CHECK(s.hot[0].what == "feature 0");
  CHECK(s.hot[0].write_share == doctest::Approx(2.0 / 7));

  SUBCASE("softmax: K coordinates per feature, the same meetings") {
    o.model = "softmax";
    o.classes = 3;
    const auto k = sparsity_stats(d, o);
    CHECK(k.omega == 6);
    CHECK(k.coordinates == 12);
    CHECK(*k.rho == doctest::Approx(0.75));
    CHECK(k.kappa == doctest::Approx(3 * 0.8125));
    CHECK(k.bias_coordinates == 3);
  }
  SUBCASE("--rho bounds: no exact rho, Delta <= rho <= the degree bound") {
    o.rho = SparsityOptions::Rho::bounds;
    const auto b = sparsity_stats(d, o);
    CHECK_FALSE(b.rho.has_value());
    CHECK(b.rho_lower == doctest::Approx(0.5));
    CHECK(b.rho_upper == doctest::Approx(0.75));
    CHECK(b.rho_how.find("--rho exact") != std::string::npos);
  }
  SUBCASE("the theories: H(tau) and Mania's limit, with and without the bias") {
    const auto plain = theory_at(s, 2, false);
    CHECK(plain.hogwild_overhead == doctest::Approx(1 + 6 * 2 * 0.75 + 6 * 4 * 2 * std::sqrt(0.5)));
    CHECK(plain.hogwild_vacuous);  // 43 > 3
    CHECK(plain.mania_limit == doctest::Approx(4 / s.conflict_degree));
    CHECK(plain.mania_vacuous == (2 > plain.mania_limit));
    const auto biased = theory_at(s, 1, true);  // Omega 3, Delta = rho = 1, conflict degree m - 1
    CHECK(biased.hogwild_overhead == doctest::Approx(1 + 6 + 6 * 3));
    CHECK(biased.mania_limit == doctest::Approx(4.0 / 3));
    CHECK_FALSE(biased.mania_vacuous);
  }
}

TEST_CASE("stats: a hashed feature space of 2^32 gives the figures of the same rows numbered "
          "densely, without tables of 2^32") {
  // The hand-worked rows, with features 1 and 3 renamed 2^32 - 2 and 2^31 (ascending
  // order kept, so ties break as before).
  const std::uint32_t a = 2147483648u, b = 4294967294u;
  const Dataset dense = rows_of({{0, 1}, {1, 2}, {3}, {0, 3}, {}}, 5);
  const Dataset hashed = rows_of({{0, a}, {a, a + 1}, {b}, {0, b}, {}}, std::size_t{b} + 1);
  SparsityOptions o;
  o.pairs = 20000;
  const auto s = sparsity_stats(dense, o), h = sparsity_stats(hashed, o);
  CHECK(h.updates == s.updates);
  CHECK(h.coordinates == s.coordinates);
  CHECK(h.omega == s.omega);
  CHECK(h.delta == s.delta);
  CHECK(h.busiest == s.busiest);  // feature 0
  REQUIRE(h.rho.has_value());
  CHECK(*h.rho == *s.rho);
  CHECK(h.kappa == s.kappa);
  CHECK(h.conflict_degree_upper == s.conflict_degree_upper);
  REQUIRE(h.hot.size() == s.hot.size());
  std::vector<std::string> names;
  for (const auto& x : h.hot) names.push_back(x.what);
  CHECK(std::find(names.begin(), names.end(), "feature 4294967294") != names.end());
  CHECK(std::find(names.begin(), names.end(), "feature 2147483648") != names.end());
}

TEST_CASE("stats: exact rho by branch and bound, and the sampled conflicts, against brute force") {
  for (std::uint64_t seed : {1, 2, 3}) {
    auto [d, unused] = test::generated_problem(400, 10, 300, 6, 0.0, seed);
    SparsityOptions o;
    o.seed = seed;
    const auto s = sparsity_stats(d, o);
    const auto [rho, conflict] = brute_force(d);
    REQUIRE(s.rho.has_value());
    CHECK(*s.rho == doctest::Approx(rho));
    CHECK(s.rho_lower <= *s.rho);
    CHECK(*s.rho <= s.rho_upper);
    const double p = conflict / double(s.updates - 1);
    INFO("sampled " << s.p_conf << " +- " << s.p_conf_se << ", brute force " << p);
    CHECK(std::abs(s.p_conf - p) < 4 * s.p_conf_se);
    CHECK(conflict <= s.conflict_degree_upper + 1e-9);
  }
}

TEST_CASE("stats: matrix factorisation is exact from the degrees") {
  // Ratings (user, item): (0,0) (0,1) (0,2) (1,0) (2,0).
  const std::vector<float> labels(5, 3.0f);
  const std::vector<std::uint32_t> users{0, 0, 0, 1, 2}, items{0, 1, 2, 0, 0};
  const Dataset d = Dataset::ratings(labels, users, items, "ratings");
  SparsityOptions o;
  o.model = "mf";
  o.rank = 4;
  const auto s = sparsity_stats(d, o);
  CHECK(s.updates == 5);
  CHECK(s.omega == 10);  // 2 (r + 1): factors and biases of a user and an item
  CHECK(s.delta == doctest::Approx(0.6));
  CHECK(*s.rho == doctest::Approx(1.0));  // (0,0) meets every rating: 3 + 3 - 1
  CHECK(s.p_conf_exact);
  CHECK(s.conflict_degree == doctest::Approx(2.4));  // 4 + 2 + 2 + 2 + 2 over 5
  CHECK(s.p_conf == doctest::Approx(0.6));
  CHECK(s.bias_coordinates == 0);  // mf's biases are per user and item, in the nodes
  CHECK(s.hot[0].what == "user 0");
  CHECK(s.hot[1].what == "item 0");
  o.bias = false;
  CHECK(sparsity_stats(d, o).omega == 8);
  // A model that needs feature rows, and mf on feature rows: ConfigErrors.
  o.model = "logistic";
  CHECK_THROWS_AS(sparsity_stats(d, o), ConfigError);
  o.model = "mf";
  CHECK_THROWS_AS(sparsity_stats(rows_of({{0}}, 1), o), ConfigError);
  o.model = "mlp";
  CHECK_THROWS_WITH_AS(sparsity_stats(rows_of({{0}}, 1), o), doctest::Contains("every weight"),
                       ConfigError);
}

TEST_CASE("stats: SpamAssassin gives the figures measured by hand in SCIENCE.md" *
          doctest::test_suite("shared_data")) {
  auto data = test::shared_data();
  if (!data) return;
  const Dataset d = read_libsvm((*data / "spamassassin" / "spam.train.svm.gz").string());
  const auto s = sparsity_stats(d, {});
  // SCIENCE.md 1.4: m 4,810, n 60,970, Omega 6,808, Delta 0.892, rho 0.9996,
  // P_conf 0.990, kappa 20.8, alpha 1.75 (d >= 5), Zipf slope 0.81.
  CHECK(s.updates == 4810);
  CHECK(s.coordinates == 60970);
  CHECK(s.omega == 6808);
  CHECK(s.delta == doctest::Approx(0.892).epsilon(0.001));
  REQUIRE(s.rho.has_value());
  CHECK(*s.rho == doctest::Approx(0.9996).epsilon(0.0001));
  CHECK(s.p_conf == doctest::Approx(0.990).epsilon(0.002));
  CHECK(s.kappa == doctest::Approx(20.8).epsilon(0.005));
  CHECK(s.alpha == doctest::Approx(1.75).epsilon(0.01));
  CHECK(s.zipf_slope == doctest::Approx(0.81).epsilon(0.01));
  // As trained (a bias): Hogwild!'s H(1) = 1 + 6 + 6 x 6,809 (SCIENCE.md's 3.9e4
  // is without the bias); Mania's limit m / (m - 1): vacuous from tau = 2.
  const auto v = theory_at(s, 1, true);
  CHECK(v.hogwild_overhead == doctest::Approx(1 + 6 + 6 * 6809.0));
  CHECK(v.hogwild_vacuous);
  CHECK(theory_at(s, 2, true).mania_vacuous);
  CHECK(theory_at(s, 1, false).hogwild_overhead == doctest::Approx(3.9e4).epsilon(0.02));
}

TEST_CASE("hogwild_data stats: the report, its JSON, and bad options") {
  test::TempDir dir;
  const std::string file = dir.file("small.svm");
  test::write_text(file, "1 1:1 2:1\n0 2:1 3:1\n1 4:1\n0 1:1 4:1\n");
  const std::string json = dir.file("stats.json");
  auto r = test::run({test::hogwild_data_path(), "stats", "--train", file, "--json", json});
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("Omega:     2 coordinates") != std::string::npos);
  CHECK(r.out.find("rho:       0.75  exact") != std::string::npos);
  CHECK(r.out.find("vacuous") != std::string::npos);
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  CHECK(j.at("updates") == 4);
  CHECK(j.at("rho").get<double>() == doctest::Approx(0.75));
  CHECK(j.at("theory").size() == 5);
  CHECK(j.at("hot").at(0).at("degree") == 2);
  // --json -: the JSON alone on standard output, the report on stderr.
  r = test::run({"/bin/sh", "-c", "exec \"$0\" stats --train \"$1\" --json - 2>/dev/null",
                 test::hogwild_data_path(), file});
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out).at("updates") == 4);

  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--model", "mf"}, "--model mf needs rating triples"},
           {{"--model", "mlp"}, "every MLP update writes every weight"},
           {{"--model", "svm"}, "--model: svm not in"},
           {{"--tau", "1,x"}, "--tau expects comma-separated staleness values"},
           {{"--rho", "maybe"}, "--rho: maybe not in"},
           // 0 pairs printed P(conflict) = 0 +- 0, a figure from no sample at all.
           {{"--pairs", "0"}, "--pairs: expected a whole number of at least 1, got 0"}}) {
    std::vector<std::string> argv{test::hogwild_data_path(), "stats", "--train", file};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto bad = test::run(argv);
    INFO(bad.out);
    CHECK(bad.exit_code == 2);
    CHECK(bad.out.find(says) != std::string::npos);
  }
  test::write_text(file, "1 1:1\n0 2:x\n");
  const auto malformed = test::run({test::hogwild_data_path(), "stats", "--train", file});
  CHECK(malformed.exit_code == 2);
  CHECK(malformed.out.find("small.svm:2") != std::string::npos);
}
