// bench_dense_layer: softmax's dense layer alone (all classes' dot products per row,
// then the batch's outer-product update of W), over Fashion-MNIST-shaped rows visited
// in shuffled order, the next rows prefetched as hogwild_train does: float rows
// (3136 bytes per 784-pixel image) against byte rows (784 bytes, Layout::dense_u8),
// on every instruction set the CPU has. The values are random (speed does not depend
// on them); the rows are 60k by default, 188 MB as floats, past every cache but L3.
//   build/bench/bench_dense_layer [--rows 60000] [--cols 784] [--classes 10] [--batch 32] [--reps 5]
// prints rows/s per variant (medians of interleaved repetitions) and the ratio to
// float rows on the same instruction set.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "hogwild/model_base.hpp"
#include "hogwild/rng.hpp"
#include "kernels/dense_layer.hpp"

using namespace hogwild;

namespace {

struct Shape {
  std::size_t rows, cols, classes, batch;
};

// One pass over the rows in `order`: forward pass per row, update per batch.
template <class T>
double pass(kernels::Isa isa, const Shape& s, const std::vector<T>& X,
            const std::vector<std::uint32_t>& order, std::vector<float>& W) {
  std::vector<float> out(s.classes * s.batch), coeff(s.classes * s.batch, 1e-9f);
  std::vector<const T*> rows(s.batch);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t b0 = 0; b0 + s.batch <= s.rows; b0 += s.batch) {
    for (std::size_t i = 0; i < s.batch; ++i) {
      if (b0 + i + 2 < s.rows) {  // two rows ahead, whole, as prefetch_row does
        const auto* p = reinterpret_cast<const char*>(X.data() + order[b0 + i + 2] * s.cols);
        for (std::size_t o = 0; o < s.cols * sizeof(T); o += 64) prefetch(p + o);
      }
      rows[i] = X.data() + order[b0 + i] * s.cols;
      kernels::multi_dot(isa, W.data(), s.cols, s.classes, rows[i], s.cols,
                         out.data() + i * s.classes);
    }
    kernels::outer_update(isa, W.data(), s.cols, s.classes, coeff.data(), s.classes,
                          rows.data(), s.batch, s.cols);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(s.rows / s.batch * s.batch) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"softmax's dense layer on float rows and on byte rows"};
  Shape s{60000, 784, 10, 32};
  int reps = 5;
  app.add_option("--rows", s.rows)->check(CLI::Range(64, 10000000));
  app.add_option("--cols", s.cols)->check(CLI::Range(1, 100000));
  app.add_option("--classes", s.classes)->check(CLI::Range(1, 1000));
  app.add_option("--batch", s.batch)->check(CLI::Range(1, 4096));
  app.add_option("--reps", reps)->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  s.batch = std::min(s.batch, s.rows);

  Rng rng(1);
  std::vector<std::uint8_t> bytes(s.rows * s.cols);
  std::vector<float> floats(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::uint8_t>(rng.next() & 255);
    floats[i] = byte_value(bytes[i]);
  }
  std::vector<std::uint32_t> order(s.rows);
  for (std::size_t i = 0; i < s.rows; ++i) order[i] = static_cast<std::uint32_t>(i);
  for (std::size_t i = s.rows - 1; i > 0; --i) std::swap(order[i], order[rng.next() % (i + 1)]);

  std::vector<kernels::Isa> isas;
  for (auto isa : {kernels::Isa::generic, kernels::Isa::avx2, kernels::Isa::avx512})
    if (kernels::supported(isa)) isas.push_back(isa);
  // [isa][0 floats, 1 bytes] -> rows/s of each repetition, interleaved
  std::vector<std::array<std::vector<double>, 2>> rate(isas.size());
  std::vector<float> W(s.classes * s.cols, 0.01f);
  for (int r = 0; r < reps; ++r)
    for (std::size_t k = 0; k < isas.size(); ++k) {
      rate[k][0].push_back(pass(isas[k], s, floats, order, W));
      rate[k][1].push_back(pass(isas[k], s, bytes, order, W));
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  fmt::print("{} rows x {} columns, {} classes, batch {}, {} interleaved repetitions (medians)\n",
             s.rows, s.cols, s.classes, s.batch, reps);
  fmt::print("| instruction set | float rows, rows/s | byte rows, rows/s | bytes vs floats |\n");
  fmt::print("|---|---|---|---|\n");
  for (std::size_t k = 0; k < isas.size(); ++k) {
    const double f = median(rate[k][0]), b = median(rate[k][1]);
    fmt::print("| {} | {:.2f}M | {:.2f}M | {:.2f}x |\n", kernels::to_string(isas[k]), f / 1e6,
               b / 1e6, b / f);
  }
  return 0;
}
