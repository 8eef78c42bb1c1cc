#include "hogwild/sparsity.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <numeric>
#include <random>
#include <set>

#include "data/file_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {
namespace {

// The hypergraph: each update's nodes (CSR), and how many coordinates a node is.
struct Hypergraph {
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> nodes;
  std::vector<std::uint64_t> multiplicity;  // per node
  std::uint64_t empty = 0;
  bool bipartite_pairs = false;  // mf: every update is one user node and one item node
  std::uint64_t users = 0;       // mf: nodes [0, users) are users, the rest items
  // Where features far outnumber the non-zeros (a hashed space of 2^32), node v is
  // feature names[v], the features that occur in ascending order; else node v is
  // feature v.
  std::vector<std::uint32_t> names;

  std::size_t updates() const { return offsets.size() - 1; }
  std::span<const std::uint32_t> edge(std::size_t e) const {
    return {nodes.data() + offsets[e], static_cast<std::size_t>(offsets[e + 1] - offsets[e])};
  }
  void close_edge() {
    if (nodes.size() == offsets.back())
      ++empty;
    else
      offsets.push_back(nodes.size());
  }
};

std::size_t distinct_labels(const Dataset& d) {
  std::set<float> labels(d.labels().begin(), d.labels().end());
  return labels.size();
}

Hypergraph build(const Dataset& d, const SparsityOptions& o, SparsityStats& s) {
  Hypergraph g;
  if (o.model == "mf") {
    if (d.layout() != Layout::ratings)
      throw ConfigError(fmt::format("--model mf needs rating triples (user item rating), and "
                                    "{} holds {} rows", d.source(), to_string(d.layout())));
    if (o.rank == 0) throw ConfigError("--rank must be at least 1");
    g.bipartite_pairs = true;
    g.users = d.users();
    g.multiplicity.assign(d.users() + d.cols(), o.rank + (o.bias ? 1 : 0));
    const auto idx = d.indices();
    g.nodes.reserve(idx.size());
    for (std::size_t r = 0; r < d.rows(); ++r) {
      g.nodes.push_back(idx[2 * r]);
      g.nodes.push_back(static_cast<std::uint32_t>(g.users + idx[2 * r + 1]));
      g.close_edge();
    }
    return g;
  }
  std::uint64_t per_feature = 1;
  if (o.model == "softmax") {
    per_feature = o.classes ? o.classes : distinct_labels(d);
    if (per_feature < 2)
      throw ConfigError(fmt::format("--model softmax needs 2 or more classes, and {} has {}",
                                    d.source(), per_feature));
  } else if (o.model != "logistic" && o.model != "hinge" && o.model != "squared") {
    throw ConfigError(fmt::format(
        "hogwild_data stats: --model must be logistic, hinge, squared, softmax or mf, got '{}'{}",
        o.model, o.model == "mlp" ? " (every MLP update writes every weight: Delta = rho = 1)" : ""));
  }
  if (d.layout() == Layout::ratings)
    throw ConfigError(fmt::format("--model {} needs feature rows, and {} holds rating triples "
                                  "(--model mf)", o.model, d.source()));
  s.bias_coordinates = o.bias ? per_feature : 0;
  g.nodes.reserve(d.dense() ? d.rows() * d.cols() / 2 : d.nnz());
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const RowView x = d.row(r);
    for (std::uint32_t j = 0; j < x.nnz; ++j)
      if (x.at(j) != 0.0f) g.nodes.push_back(x.dense() ? j : x.index[j]);  // a zero writes nothing
    g.close_edge();
  }
  if (d.cols() <= 2 * g.nodes.size() + 65536) {
    g.multiplicity.assign(d.cols(), per_feature);
    return g;
  }
  // Tables a feature would cost more than the rows do: number the features that occur.
  g.names = g.nodes;
  std::sort(g.names.begin(), g.names.end());
  g.names.erase(std::unique(g.names.begin(), g.names.end()), g.names.end());
  for (std::uint32_t& v : g.nodes)
    v = static_cast<std::uint32_t>(std::lower_bound(g.names.begin(), g.names.end(), v) - g.names.begin());
  g.multiplicity.assign(g.names.size(), per_feature);
  return g;
}

std::string node_name(const Hypergraph& g, std::uint64_t v) {
  if (!g.bipartite_pairs) return fmt::format("feature {}", g.names.empty() ? v : g.names[v]);
  return v < g.users ? fmt::format("user {}", v) : fmt::format("item {}", v - g.users);
}

// Exact rho by branch and bound: updates in decreasing order of their bound U(e),
// each one's neighbourhood counted with a stamp per update, until the best found
// reaches the next bound.
void exact_rho(const Hypergraph& g, const std::vector<std::uint64_t>& degree,
               const std::vector<std::uint64_t>& bound, const SparsityOptions& o, SparsityStats& s) {
  const std::size_t m = g.updates();
  std::vector<std::uint64_t> start(degree.size() + 1, 0);
  for (std::size_t v = 0; v < degree.size(); ++v) start[v + 1] = start[v] + degree[v];
  std::vector<std::uint32_t> postings(start.back());
  {
    std::vector<std::uint64_t> fill(start.begin(), start.end() - 1);
    for (std::size_t e = 0; e < m; ++e)
      for (std::uint32_t v : g.edge(e)) postings[fill[v]++] = static_cast<std::uint32_t>(e);
  }
  std::vector<std::uint32_t> order(m);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return bound[a] > bound[b];
  });
  std::vector<std::uint32_t> stamp(m, 0);
  std::uint64_t best = 0, visits = 0;
  std::uint32_t tag = 0;
  for (std::uint32_t e : order) {
    if (best >= bound[e]) break;
    if ((tag & 63) == 63 && o.cancelled && o.cancelled()) throw Interrupted(SIGINT);
    ++tag;
    std::uint64_t met = 0;
    for (std::uint32_t v : g.edge(e))
      for (std::uint64_t k = start[v]; k < start[v + 1]; ++k) {
        const std::uint32_t f = postings[k];
        if (stamp[f] != tag) {
          stamp[f] = tag;
          ++met;
        }
      }
    visits += [&] {
      std::uint64_t n = 0;
      for (std::uint32_t v : g.edge(e)) n += degree[v];
      return n;
    }();
    best = std::max(best, met);
    if (best == m) break;
  }
  s.rho = static_cast<double>(best) / static_cast<double>(m);
  s.rho_visits = visits;
}

// P(two distinct random updates share a node), from `pairs` pairs.
void sample_conflicts(const Hypergraph& g, std::size_t nodes, const SparsityOptions& o,
                      SparsityStats& s) {
  const std::size_t m = g.updates();
  if (m < 2 || o.pairs == 0) return;
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<std::size_t> pick(0, m - 1);
  std::vector<std::uint32_t> stamp(nodes, 0);
  std::uint64_t hits = 0;
  for (std::uint32_t k = 1; k <= o.pairs; ++k) {
    if ((k & 4095) == 0 && o.cancelled && o.cancelled()) throw Interrupted(SIGINT);
    const std::size_t a = pick(rng);
    std::size_t b = pick(rng);
    while (b == a) b = pick(rng);
    for (std::uint32_t v : g.edge(a)) stamp[v] = k;
    for (std::uint32_t v : g.edge(b))
      if (stamp[v] == k) {
        ++hits;
        break;
      }
  }
  const double p = static_cast<double>(hits) / static_cast<double>(o.pairs);
  s.pairs = o.pairs;
  s.p_conf = p;
  s.p_conf_se = std::sqrt(p * (1 - p) / static_cast<double>(o.pairs));
  s.conflict_degree = p * static_cast<double>(m - 1);
}

void degree_shape(std::vector<std::uint64_t> degrees, SparsityStats& s) {
  std::erase(degrees, 0);
  double sum_log = 0;
  std::uint64_t n = 0;
  for (auto d : degrees)
    if (d >= s.alpha_min) {
      sum_log += std::log(static_cast<double>(d) / (static_cast<double>(s.alpha_min) - 0.5));
      ++n;
    }
  s.alpha_nodes = n;
  s.alpha = n > 0 && sum_log > 0 ? 1 + static_cast<double>(n) / sum_log : 0;
  std::sort(degrees.begin(), degrees.end(), std::greater<>());
  const std::size_t last = std::min<std::size_t>(1000, degrees.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0, k = 0;
  for (std::size_t r = 10; r <= last; ++r) {
    const double x = std::log(static_cast<double>(r));
    const double y = std::log(static_cast<double>(degrees[r - 1]));
    sx += x, sy += y, sxx += x * x, sxy += x * y, k += 1;
  }
  if (k >= 2 && k * sxx - sx * sx > 0) s.zipf_slope = -(k * sxy - sx * sy) / (k * sxx - sx * sx);
}

}  // namespace

SparsityStats sparsity_stats(const Dataset& data, const SparsityOptions& o) {
  if (o.pairs >= UINT32_MAX)  // (a pair's stamp is 32 bits)
    throw ConfigError(fmt::format("--pairs {}: at most {} pairs", o.pairs, UINT32_MAX - 1));
  SparsityStats s;
  s.model = o.model;
  const Hypergraph g = build(data, o, s);
  const std::size_t m = g.updates(), nodes = g.multiplicity.size();
  s.updates = m;
  s.empty = g.empty;
  if (m == 0)
    throw ConfigError(fmt::format("{}: no row writes any coordinate (all {} are empty)",
                                  data.source(), g.empty));
  const double md = static_cast<double>(m);

  std::vector<std::uint64_t> degree(nodes, 0);
  for (std::uint32_t v : g.nodes) ++degree[v];
  std::uint64_t omega = 0, total = 0;
  for (std::size_t e = 0; e < m; ++e) {
    std::uint64_t size = 0;
    for (std::uint32_t v : g.edge(e)) size += g.multiplicity[v];
    omega = std::max(omega, size);
    total += size;
  }
  s.omega = omega;
  s.mean_size = static_cast<double>(total) / md;
  const auto busiest = static_cast<std::size_t>(
      std::max_element(degree.begin(), degree.end()) - degree.begin());
  s.delta = static_cast<double>(degree[busiest]) / md;
  s.busiest = node_name(g, busiest);
  double squares = 0, pairs_upper = 0;
  for (std::size_t v = 0; v < nodes; ++v) {
    if (degree[v] == 0) continue;
    s.coordinates += g.multiplicity[v];
    const double d = static_cast<double>(degree[v]);
    squares += d * d;
    pairs_upper += d * (d - 1);
    s.kappa += static_cast<double>(g.multiplicity[v]) * (d / md) * (d / md);
  }
  s.rho_cost = squares;
  s.conflict_degree_upper = pairs_upper / md;

  // The bound U(e) = min(m, sum d_v - |e| + 1) of each update.
  std::vector<std::uint64_t> bound(m);
  std::uint64_t widest = 0;
  for (std::size_t e = 0; e < m; ++e) {
    std::uint64_t sum = 0;
    for (std::uint32_t v : g.edge(e)) sum += degree[v];
    bound[e] = std::min<std::uint64_t>(m, sum - g.edge(e).size() + 1);
    widest = std::max(widest, bound[e]);
  }
  s.rho_lower = s.delta;
  s.rho_upper = static_cast<double>(widest) / md;

  const auto t0 = std::chrono::steady_clock::now();
  if (g.bipartite_pairs) {
    // |N(u, i)| = d_u + d_i - 1 (each pair rated once), the bound itself.
    s.rho = s.rho_upper;
    s.rho_how = "exact: max over ratings of (d_user + d_item - 1) / m";
    s.conflict_degree = squares / md - 2;
    s.p_conf = m > 1 ? s.conflict_degree / (md - 1) : 0;
    s.p_conf_exact = true;
  } else {
    if (degree[busiest] == m) {
      s.rho = 1.0;  // rho >= Delta = 1
      s.rho_how = fmt::format("exact: {} is in every update", s.busiest);
    } else if (o.rho == SparsityOptions::Rho::exact ||
               (o.rho == SparsityOptions::Rho::automatic && squares <= o.exact_budget)) {
      exact_rho(g, degree, bound, o, s);
      s.rho_how = fmt::format("exact: {} of at most {:.3g} posting visits (branch and bound)",
                              s.rho_visits, squares);
    } else {
      s.rho_how = fmt::format(
          "bounds only: exact rho would visit up to {:.3g} postings (sum of squared degrees; "
          "about {:.0f} s at 1.4e9 a second); ask with --rho exact",
          squares, squares / 1.4e9);
    }
    sample_conflicts(g, nodes, o, s);
  }
  s.rho_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<std::uint32_t> order(nodes);
  std::iota(order.begin(), order.end(), 0u);
  const std::size_t top = std::min(o.top, nodes);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](std::uint32_t a, std::uint32_t b) {
                      return degree[a] != degree[b] ? degree[a] > degree[b] : a < b;
                    });
  for (std::size_t k = 0; k < top && degree[order[k]] > 0; ++k) {
    const std::uint32_t v = order[k];
    const double d = static_cast<double>(degree[v]);
    s.hot.push_back({node_name(g, v), degree[v], d / md,
                     d * static_cast<double>(g.multiplicity[v]) / static_cast<double>(total)});
  }
  degree_shape(std::move(degree), s);
  return s;
}

TheoryView theory_at(const SparsityStats& s, double tau, bool with_bias) {
  const bool all = with_bias && s.bias_coordinates > 0;
  const double rho = all ? 1.0 : s.rho.value_or(s.rho_upper);
  const double delta = all ? 1.0 : s.delta;
  const double omega = static_cast<double>(s.omega + (all ? s.bias_coordinates : 0));
  const double conflict = all ? static_cast<double>(s.updates - 1) : s.conflict_degree;
  TheoryView v;
  v.tau = tau;
  v.hogwild_overhead = 1 + 6 * tau * rho + 6 * tau * tau * omega * std::sqrt(delta);
  v.hogwild_vacuous = v.hogwild_overhead >= tau + 1;
  v.mania_limit = conflict > 0 ? static_cast<double>(s.updates) / conflict
                               : std::numeric_limits<double>::infinity();
  v.mania_vacuous = tau > v.mania_limit;
  return v;
}

std::string sparsity_json(const SparsityStats& s, const std::vector<TheoryView>& theory,
                          const std::string& source, int indent) {
  nlohmann::json hot = nlohmann::json::array();
  for (const auto& h : s.hot)
    hot.push_back({{"what", h.what}, {"degree", h.degree}, {"fraction", h.fraction},
                   {"write_share", h.write_share}});
  nlohmann::json views = nlohmann::json::array();
  for (const auto& v : theory)
    views.push_back({{"tau", v.tau}, {"hogwild_overhead", v.hogwild_overhead},
                     {"hogwild_vacuous", v.hogwild_vacuous}, {"mania_limit", v.mania_limit},
                     {"mania_vacuous", v.mania_vacuous}});
  nlohmann::json j = {
      {"data", source}, {"model", s.model}, {"updates", s.updates}, {"empty_rows", s.empty},
      {"coordinates", s.coordinates}, {"omega", s.omega}, {"mean_update_size", s.mean_size},
      {"delta", s.delta}, {"busiest", s.busiest}, {"rho_lower", s.rho_lower},
      {"rho_upper", s.rho_upper}, {"rho_how", s.rho_how}, {"rho_cost_visits", s.rho_cost},
      {"rho_visits", s.rho_visits}, {"seconds", s.rho_seconds},
      {"conflict_degree", s.conflict_degree}, {"conflict_degree_upper", s.conflict_degree_upper},
      {"p_conflict", s.p_conf}, {"p_conflict_se", s.p_conf_se}, {"p_conflict_exact", s.p_conf_exact},
      {"pairs_sampled", s.pairs}, {"kappa", s.kappa}, {"hot", hot},
      {"power_law_alpha", s.alpha}, {"power_law_min_degree", s.alpha_min},
      {"power_law_nodes", s.alpha_nodes}, {"zipf_slope", s.zipf_slope},
      {"bias_coordinates", s.bias_coordinates}, {"theory", views}};
  j["rho"] = s.rho ? nlohmann::json(*s.rho) : nlohmann::json(nullptr);
  return detail::json_text(j, indent);
}

}  // namespace hogwild
