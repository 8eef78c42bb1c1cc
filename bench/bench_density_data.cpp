// bench_density_data: Fashion-MNIST images at chosen densities, each stored three
// ways, for the sparse-or-dense crossover (bench/suite.py, section density). Pixels
// below a cut are zeroed until the density is reached (above the images' own
// density, zero pixels are set to 1/255 at random), then the same rows are written
// as CSR floats, dense bytes (Dataset::densified) and dense floats (widened()), with
// the 10 classes and with binary labels (class >= 5) for the linear models.
//
//   build/bench/bench_density_data --images .../train-images-idx3-ubyte.gz
//       --densities 0.05,0.2,0.5 --rows 60000 --out bench-out/data/density
//     -> density-0.05.{sparse,u8,f32}.cache, density-0.05.bin.{sparse,f32}.cache, ...
//     and one line per density: "density 0.05: actual 0.0502, cut 87"
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "hogwild/data_io.hpp"

namespace {

using hogwild::Dataset;

// A sparse set holding the pixels of `px` (rows x cols bytes) that are not zero.
Dataset sparse_of(const std::vector<std::uint8_t>& px, std::span<const float> labels,
                  std::size_t cols) {
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  for (std::size_t r = 0; r < labels.size(); ++r) {
    for (std::size_t j = 0; j < cols; ++j) {
      if (const std::uint8_t b = px[r * cols + j]) {
        indices.push_back(static_cast<std::uint32_t>(j));
        values.push_back(hogwild::byte_value(b));
      }
    }
    offsets.push_back(indices.size());
  }
  return Dataset::sparse(labels, offsets, indices, values, cols, "density");
}

}  // namespace

int main(int argc, char** argv) {
  std::string images, out;
  std::vector<double> densities{0.05, 0.1, 0.2, 0.3, 0.5, 0.75};
  std::size_t rows = 0;
  CLI::App app{"Fashion-MNIST at chosen densities, sparse and dense caches"};
  app.add_option("--images", images, "IDX images (labels beside them)")->required();
  app.add_option("--densities", densities, "Target densities")->delimiter(',');
  app.add_option("--rows", rows, "Rows kept (0 = all)");
  app.add_option("--out", out, "Path prefix of the files written")->required();
  CLI11_PARSE(app, argc, argv);

  const Dataset all = hogwild::read_idx(images);
  const std::size_t n = rows ? std::min(rows, all.rows()) : all.rows(), cols = all.cols();
  const auto source = all.pixels().first(n * cols);
  const auto labels = all.labels().first(n);
  std::vector<float> binary(labels.begin(), labels.end());
  for (float& y : binary) y = y >= 5 ? 1.0f : 0.0f;
  std::array<std::size_t, 256> histogram{};
  for (std::uint8_t b : source) ++histogram[b];
  const double cells = static_cast<double>(source.size());
  const double natural = 1.0 - static_cast<double>(histogram[0]) / cells;

  for (double target : densities) {
    std::vector<std::uint8_t> px(source.begin(), source.end());
    int cut = 1;  // pixels below it are zeroed
    if (target < natural) {
      // The smallest cut whose kept share is at most the target.
      double kept = natural;
      while (cut < 255 && kept > target) kept -= static_cast<double>(histogram[cut++]) / cells;
      for (auto& b : px)
        if (b < cut) b = 0;
    } else {
      // Zero pixels become 1/255 with the probability that brings the share up.
      const double p = (target - natural) / (1.0 - natural);
      std::uint64_t state = 0x9e3779b97f4a7c15ULL;
      for (auto& b : px) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        if (b == 0 && static_cast<double>(state >> 11) * 0x1.0p-53 < p) b = 1;
      }
    }
    const std::string stem = fmt::format("{}-{}", out, target);
    for (bool bin : {false, true}) {
      const Dataset sparse = sparse_of(px, bin ? std::span<const float>(binary) : labels, cols);
      const Dataset bytes = sparse.densified(cols);
      if (bytes.layout() != hogwild::Layout::dense_u8) {
        fmt::print(stderr, "bench_density_data: densified() did not give bytes\n");
        return 1;
      }
      const std::string kind = bin ? ".bin" : "";
      hogwild::write_cache(sparse, stem + kind + ".sparse.cache");
      hogwild::write_cache(bytes.widened(), stem + kind + ".f32.cache");
      if (!bin) hogwild::write_cache(bytes, stem + kind + ".u8.cache");
      if (!bin)
        fmt::print("density {}: actual {:.4f}, cut {}\n", target, hogwild::density(sparse), cut);
    }
  }
  return 0;
}
