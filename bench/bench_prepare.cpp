// bench_prepare: writes one generated RCV1-like problem (power-law feature
// popularity) as a training and a test binary cache cut from the same draw, so the
// test set shares the hidden weights. bench/run.sh calls it once per suite.
//
//   build/bench/bench_prepare --rows 500000 --out bench-out/data/rcv1like
//     -> rcv1like.train.cache, rcv1like.test.cache (+ .train.svm with --libsvm)
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "hogwild/data_io.hpp"
#include "slice.hpp"

int main(int argc, char** argv) {
  hogwild::GenerateOptions g;
  g.rows = 500000;
  g.features = 50000;
  g.nnz_per_row = 75;
  g.noise = 0.05;
  std::size_t test_rows = 0;
  std::string out;
  bool libsvm = false;
  CLI::App app{"Generate the benches' RCV1-like train/test caches"};
  app.add_option("--rows", g.rows, "Training rows")->capture_default_str();
  app.add_option("--test-rows", test_rows, "Test rows (default: a tenth of --rows)");
  app.add_option("--features", g.features)->capture_default_str();
  app.add_option("--nnz-per-row", g.nnz_per_row)->capture_default_str();
  app.add_option("--zipf", g.zipf_exponent)->capture_default_str();
  app.add_option("--seed", g.seed)->capture_default_str();
  app.add_option("--out", out, "Path prefix of the files written")->required();
  app.add_flag("--libsvm", libsvm, "Also write the training set as libsvm text (parse bench)");
  CLI11_PARSE(app, argc, argv);
  if (test_rows == 0) test_rows = std::max<std::size_t>(1, g.rows / 10);
  const std::size_t n_train = g.rows;
  g.rows = n_train + test_rows;
  const hogwild::Dataset all = hogwild::generate_sparse(g);
  const auto train = hogwild::bench::slice(all, 0, n_train, "train");
  const auto test = hogwild::bench::slice(all, n_train, all.rows(), "test");
  hogwild::write_cache(train, out + ".train.cache");
  hogwild::write_cache(test, out + ".test.cache");
  if (libsvm) hogwild::write_libsvm(train, out + ".train.svm");
  fmt::print("{}: {} train + {} test rows, {} features, {:.1f} non-zeros per row\n", out,
             train.rows(), test.rows(), train.cols(),
             static_cast<double>(train.nnz()) / static_cast<double>(train.rows()));
  return 0;
}
