// bench_modes: throughput of every update mode on one generated RCV1-like problem
// (sparse logistic regression, power-law feature popularity), with 1 and 2
// workers, as ratios to serial measured in the same run. Repetitions are
// interleaved (A B C ... A B C) and each cell is a median, because the machines are
// shared and noisy (docs/PERFORMANCE.md).
//
//   build/bench/bench_modes                      # 200k x 50k, ~75 nnz/row, 3 reps
//   build/bench/bench_modes --rows 50000 --reps 1 --json out.json
//
// Prints a markdown table: mode, workers, examples/s, non-zeros/s, ratio to serial,
// test accuracy.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <fstream>
#include <map>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/trainer.hpp"
#include "slice.hpp"

using namespace hogwild;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  GenerateOptions g;
  g.rows = 200000;
  g.features = 50000;
  g.nnz_per_row = 75;
  g.noise = 0.05;
  unsigned epochs = 5, reps = 3;
  float lr = 0.5f;
  std::string json_path;
  CLI::App app{"Throughput of serial, hogwild, atomic, lock and striped on a generated sparse "
               "problem"};
  app.add_option("--rows", g.rows, "Training rows (a quarter more are generated for the test set)")->capture_default_str();
  app.add_option("--features", g.features)->capture_default_str();
  app.add_option("--nnz-per-row", g.nnz_per_row)->capture_default_str();
  app.add_option("--epochs", epochs)->capture_default_str();
  app.add_option("--reps", reps, "Interleaved repetitions; each cell is their median")->capture_default_str();
  app.add_option("--lr", lr)->capture_default_str();
  app.add_option("--json", json_path, "Also write the raw figures here");
  CLI11_PARSE(app, argc, argv);

  const std::size_t n_train = g.rows;
  g.rows = n_train + n_train / 4;
  const Dataset all = generate_sparse(g);
  const Dataset train_set = bench::slice(all, 0, n_train, "train");
  const Dataset test_set = bench::slice(all, n_train, all.rows(), "test");
  fmt::print("generated {} train rows, {} features, {:.1f} non-zeros per row\n", train_set.rows(),
             train_set.cols(), static_cast<double>(train_set.nnz()) / train_set.rows());

  struct Cell {
    Mode mode;
    unsigned workers;
    std::int64_t stripes = 0;  // striped: --stripes
    std::vector<double> rate = {}, nnz_rate = {}, accuracy = {};
    std::string label() const {
      return stripes ? fmt::format("{} {}", to_string(mode), stripes) : std::string(to_string(mode));
    }
  };
  std::vector<Cell> cells{{Mode::serial, 1}};
  const Mode striped = parse_mode("striped");
  for (unsigned w : {1u, 2u}) {
    for (Mode m : {Mode::hogwild, Mode::atomic, Mode::lock}) cells.push_back({m, w});
    for (std::int64_t k : {1, 64, 1024}) cells.push_back({striped, w, k});  // lock .. hogwild
  }

  for (unsigned rep = 0; rep < reps; ++rep) {
    for (auto& c : cells) {
      TrainConfig cfg;
      cfg.mode = c.mode;
      cfg.workers = c.workers;
      if (c.stripes) cfg.mode_options["stripes"] = c.stripes;
      cfg.epochs = epochs;
      cfg.step_size.lr0 = lr;
      cfg.step_size.decay = 0.9f;
      cfg.seed = 1 + rep;
      const auto r = train(cfg, train_set, &test_set);
      c.rate.push_back(r.samples_per_second);
      c.nnz_rate.push_back(r.nnz_per_second);
      c.accuracy.push_back(r.test.accuracy);
      std::fprintf(stderr, "rep %u %s x%u: %.0f examples/s\n", rep + 1, c.label().c_str(),
                   c.workers, r.samples_per_second);
    }
  }

  const double serial = median(cells[0].rate);
  fmt::print("\n| mode | workers | examples/s | non-zeros/s | vs serial | test accuracy |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|\n");
  nlohmann::json out = nlohmann::json::array();
  for (auto& c : cells) {
    const double rate = median(c.rate);
    fmt::print("| {} | {} | {:.3g}M | {:.3g}M | {:.2f}x | {:.4f} |\n", c.label(), c.workers,
               rate / 1e6, median(c.nnz_rate) / 1e6, rate / serial, median(c.accuracy));
    out.push_back({{"mode", std::string(to_string(c.mode))}, {"stripes", c.stripes},
                   {"workers", c.workers},
                   {"examples_per_second", c.rate}, {"nnz_per_second", c.nnz_rate},
                   {"test_accuracy", c.accuracy}, {"ratio_to_serial", rate / serial}});
  }
  fmt::print("\n{} repetitions, interleaved; medians; {} epochs each\n", reps, epochs);
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
