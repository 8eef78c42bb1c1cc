// How parallelisable a data set is for a model: the Hogwild! paper's statistics of
// the hypergraph whose edges are the updates (a row, or a rating) and whose nodes
// are the coordinates each update reads and writes (Niu, Recht, Re, Wright 2011;
// docs/EXPERIMENTS.md, "How parallelisable is this data?"), and what the
// convergence theories make of them.
//
//   Omega = max_e |e|             the largest update, in coordinates
//   Delta = max_v d_v / m         the busiest coordinate's share of the m updates
//   rho   = max_e |N(e)| / m      the largest share of updates that meet one update
//
// Delta and Omega take one pass. Exact rho costs sum_v d_v^2 posting visits
// (quadratic in the rows on text data): it is computed where that is affordable
// (branch and bound on the bound below), and otherwise bounded,
// Delta <= rho <= max_e (sum_{v in e} d_v - |e| + 1) / m, with the probability
// that two random updates share a coordinate sampled beside it. For matrix
// factorisation everything is exact in O(m): |N(u, i)| = d_u + d_i - 1.
//
// A bias (or anything every update writes) makes Delta = rho = 1 whatever the
// data: the statistics are of the other coordinates, and `bias` says what the model
// as trained adds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild {

struct SparsityOptions {
  // logistic, hinge, squared (a coordinate per feature), softmax (K per feature),
  // mf (rank r per user and per item; ratings data).
  std::string model = "logistic";
  std::size_t classes = 0;  // softmax: K (0: the training labels' distinct values)
  std::size_t rank = 10;    // mf: r
  bool bias = true;         // the model's biases (per class; per user and item for mf)
  enum class Rho { automatic, exact, bounds } rho = Rho::automatic;
  // Rho::automatic computes rho exactly when sum_v d_v^2 is at most this.
  double exact_budget = 2e10;
  std::size_t pairs = 200000;  // sampled for the probability of a conflict (below 2^32)
  std::size_t top = 10;        // hot coordinates listed
  std::uint64_t seed = 1;
  // Asked every few thousand steps of the long loops (the sampled pairs, exact rho's
  // updates): true stops the computation with Interrupted (a caller's Ctrl-C).
  std::function<bool()> cancelled;
};

// One node of the hypergraph: a feature (with its K softmax coordinates), a user
// or an item (its r factors, and its bias).
struct HotCoordinate {
  std::string what;        // "feature 17", "user 3", "item 9"
  std::uint64_t degree;    // updates that write it
  double fraction;         // degree / m
  double write_share;      // its share of all coordinate writes
};

struct SparsityStats {
  std::string model;
  std::uint64_t updates = 0;      // m: rows (or ratings) that write some coordinate
  std::uint64_t empty = 0;        // rows that write none (left out of m)
  std::uint64_t coordinates = 0;  // coordinates some update writes
  std::uint64_t omega = 0;        // Omega, in coordinates
  double mean_size = 0;           // mean |e|
  double delta = 0;
  std::string busiest;            // the node with the largest degree
  double rho_lower = 0, rho_upper = 0;  // Delta <= rho <= the bound
  std::optional<double> rho;            // exact, where computed
  std::string rho_how;                  // how rho was found, or why it was not
  double rho_cost = 0;            // sum_v d_v^2 posting visits: exact rho's worst case
  std::uint64_t rho_visits = 0;   // visits made
  double rho_seconds = 0;
  // The average conflict degree (Mania et al.): mean over updates of the other
  // updates each one meets; exact for mf, else p_conf x (m - 1), with its bound
  // (1/m) sum_v d_v (d_v - 1).
  double conflict_degree = 0, conflict_degree_upper = 0;
  // P(two random updates share a coordinate): exact for mf, else sampled.
  double p_conf = 0, p_conf_se = 0;
  bool p_conf_exact = false;
  std::uint64_t pairs = 0;
  double kappa = 0;  // expected coordinates two random updates share: sum_v (d_v / m)^2
  std::vector<HotCoordinate> hot;
  // Node degrees: power-law exponent alpha (discrete maximum likelihood over the
  // degrees >= alpha_min, alpha_nodes of them) and the Zipf rank-frequency slope
  // (least squares of log d_(r) on log r over ranks 10..1000).
  double alpha = 0, zipf_slope = 0;
  std::uint64_t alpha_min = 5, alpha_nodes = 0;
  // The bias coordinates the model writes in every update (0 without one, 1 for a
  // linear model, K for softmax; mf's biases are per user and item, in the nodes).
  std::uint64_t bias_coordinates = 0;
};

SparsityStats sparsity_stats(const Dataset& data, const SparsityOptions& options);

// The theories' view at a staleness tau, of the model as trained (with_bias: a
// coordinate in every update makes Delta = rho = 1).
struct TheoryView {
  double tau = 0;
  // Hogwild!'s Proposition 4.1: the iterations grow by H = 1 + 6 tau rho + 6 tau^2
  // Omega Delta^(1/2) over serial's. Vacuous when H >= tau + 1: the bound then
  // allows no speed-up from tau + 1 workers.
  double hogwild_overhead = 0;
  bool hogwild_vacuous = false;
  // Mania et al.'s Theorem 4: serial's rate (up to constants) while tau <=
  // m / conflict_degree. Vacuous when tau exceeds it.
  double mania_limit = 0;
  bool mania_vacuous = false;
};
TheoryView theory_at(const SparsityStats& stats, double tau, bool with_bias);

// The statistics and the theories' views as one JSON object (`source` names the
// data): what `hogwild_data stats --json` writes and hogwild.stats() returns; on one
// line, or indented by `indent` spaces a level.
std::string sparsity_json(const SparsityStats& stats, const std::vector<TheoryView>& theory,
                          const std::string& source, int indent = -1);

}  // namespace hogwild
