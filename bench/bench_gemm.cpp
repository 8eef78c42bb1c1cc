// bench_gemm: the dense kernel behind the MLP against a naive triple loop (and
// against OpenBLAS's cblas_sgemm when --blas names its shared library), on the
// three products of one 784-256 layer with a mini-batch of B rows (X: B x 784, row by
// row, as the MLP keeps its input):
//   forward   Z^T  = W · X^T        (256 x B, k = 784)
//   gradient  dW   = dZ^T · X       (256 x 784, k = B)
//   backprop  dX^T = W^T · dZ^T     (784 x B, k = 256)
// each also as the MLP runs it under hogwild, on live shared weights (kernels::Live:
// W read in whole lanes, the SGD step added straight into W), plus the per-batch
// copy of the shared weights that atomic mode still takes (kernels::copy_from_shared);
// and, where the CPU has a bf16 unit (AMX tiles or AVX512-BF16), the bf16 products
// with their operands' packing.
//   build/bench/bench_gemm [--batch 32] [--reps 15] [--blas /usr/lib/x86_64-linux-gnu/libopenblas.so.0]
// prints GFLOP/s per kernel (medians of interleaved repetitions) and the ratio to naive.
#include <dlfcn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <functional>
#include <string>
#include <vector>

#include "hogwild/rng.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"

using namespace hogwild;
using kernels::Matrix;

namespace {

// cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                       int, float, float*, int);

struct Product {
  std::string name;
  std::size_t m, n, k;
  Matrix a, b;
  bool ta, tb;  // A / B are stored transposed (for BLAS): a unit row stride
  kernels::Live live = {};
  bool accumulate = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t batch = 32;
  int reps = 15;
  std::string blas_path;
  CLI::App app{"GEMM kernel vs naive loops (and OpenBLAS) on the MLP's shapes"};
  app.add_option("--batch", batch, "Mini-batch size")->capture_default_str();
  app.add_option("--reps", reps, "Interleaved repetitions (median reported)")->capture_default_str();
  app.add_option("--blas", blas_path, "Shared library with cblas_sgemm to compare with");
  CLI11_PARSE(app, argc, argv);

  Sgemm sgemm = nullptr;
  if (!blas_path.empty()) {
    void* lib = dlopen(blas_path.c_str(), RTLD_NOW);
    if (lib) sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "cblas_sgemm"));
    if (!sgemm) fmt::print("cannot use {}: {}\n", blas_path, dlerror());
  }

  const std::size_t in = 784, out = 256, B = batch;
  Rng rng(1);
  auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(rng.normal());
    return v;
  };
  auto W = random(out * in), X = random(B * in), dZt = random(out * B);
  std::vector<float> C(in * out, 0.f);
  const auto sd = [](std::size_t s) { return static_cast<std::ptrdiff_t>(s); };
  const kernels::Live live_a{true, false}, live_c{false, true};
  const std::vector<Product> products{
      {"forward", out, B, in, {W.data(), sd(in), 1}, {X.data(), 1, sd(in)}, false, true},
      {"gradient", out, in, B, {dZt.data(), sd(B), 1}, {X.data(), sd(in), 1}, false, false},
      {"backprop", in, B, out, {W.data(), 1, sd(in)}, {dZt.data(), sd(B), 1}, true, false},
      {"fwd live", out, B, in, {W.data(), sd(in), 1}, {X.data(), 1, sd(in)}, false, true, live_a},
      // C += (the SGD step into W: the scale is in dZ); C stays near zero
      {"grad live", out, in, B, {dZt.data(), sd(B), 1}, {X.data(), sd(in), 1}, false, false,
       live_c, true},
      {"back live", in, B, out, {W.data(), 1, sd(in)}, {dZt.data(), sd(B), 1}, true, false,
       live_a},
  };
  for (auto& v : dZt) v *= 1e-6f;  // so that repeated accumulation stays finite

  std::vector<std::pair<std::string, std::function<void(const Product&)>>> kernels{
      {"naive", [&](const Product& p) {
         kernels::gemm_naive(p.m, p.n, p.k, p.a, p.b, C.data(), p.n, p.accumulate);
       }}};
  for (kernels::Isa isa : {kernels::Isa::generic, kernels::Isa::avx2, kernels::Isa::avx512})
    if (kernels::supported(isa))
      kernels.emplace_back(std::string(kernels::to_string(isa)), [&, isa](const Product& p) {
        kernels::gemm(isa, p.m, p.n, p.k, p.a, p.b, C.data(), p.n, p.accumulate, p.live);
      });
  // bf16 operands on the best bf16 unit (--matmul-precision bf16), packing included:
  // the MLP packs both operands of every product every batch.
  kernels::bf16::Packed pa, pb;
  const std::string unit =
      kernels::bf16::available() ? std::string(kernels::bf16::to_string(kernels::bf16::best_unit())) : "";
  if (kernels::bf16::available())
    kernels.emplace_back("bf16 " + unit + "+pack", [&](const Product& p) {
      kernels::bf16::pack_a(p.m, p.k, p.a.data, p.a.rs, p.a.cs, pa, p.live.a && p.a.cs == 1);
      kernels::bf16::pack_b(p.k, p.n, p.b.data, p.b.rs, p.b.cs, pb);
      kernels::bf16::gemm(p.m, p.n, p.k, pa.data(), pb.data(), C.data(), p.n,
                          p.accumulate ? kernels::bf16::Epilogue::add_live
                                       : kernels::bf16::Epilogue::store);
    });
  else
    fmt::print("no bf16 column: {}\n", kernels::bf16::unavailable_reason());
  // The tiles alone, on operands packed once (what packing costs is the difference).
  std::vector<std::pair<kernels::bf16::Packed, kernels::bf16::Packed>> packed;
  if (kernels::bf16::available()) {
    for (const auto& p : products) {
      packed.emplace_back();
      kernels::bf16::pack_a(p.m, p.k, p.a.data, p.a.rs, p.a.cs, packed.back().first);
      kernels::bf16::pack_b(p.k, p.n, p.b.data, p.b.rs, p.b.cs, packed.back().second);
    }
    kernels.emplace_back("bf16 " + unit + " only", [&](const Product& p) {
      const auto& [a, b] = packed[static_cast<std::size_t>(&p - products.data())];
      kernels::bf16::gemm(p.m, p.n, p.k, a.data(), b.data(), C.data(), p.n,
                          p.accumulate ? kernels::bf16::Epilogue::add_live
                                       : kernels::bf16::Epilogue::store);
    });
  }
  if (sgemm)
    kernels.emplace_back("OpenBLAS", [&](const Product& p) {
      const int lda = static_cast<int>(p.ta ? p.a.cs : p.a.rs);
      const int ldb = static_cast<int>(p.tb ? p.b.cs : p.b.rs);
      sgemm(101, p.ta ? 112 : 111, p.tb ? 112 : 111, static_cast<int>(p.m),
            static_cast<int>(p.n), static_cast<int>(p.k), 1.f, p.a.data, lda, p.b.data, ldb,
            p.accumulate ? 1.f : 0.f, C.data(), static_cast<int>(p.n));
    });

  // Each timing is one call repeated for about 0.2 s; kernels interleave (A B C A B C).
  std::vector<std::vector<std::vector<double>>> gflops(
      products.size(), std::vector<std::vector<double>>(kernels.size()));
  for (int r = 0; r < reps; ++r)
    for (std::size_t p = 0; p < products.size(); ++p)
      for (std::size_t q = 0; q < kernels.size(); ++q) {
        const auto& pr = products[p];
        const double flop = 2.0 * static_cast<double>(pr.m * pr.n * pr.k);
        std::size_t calls = 0;
        const auto t0 = std::chrono::steady_clock::now();
        double s = 0;
        do {
          kernels[q].second(pr);
          ++calls;
        } while ((s = seconds_since(t0)) < (q == 0 ? 0.1 : 0.2));
        gflops[p][q].push_back(flop * static_cast<double>(calls) / s * 1e-9);
      }

  fmt::print("batch {}, {} repetitions, medians; dispatch picks {}\n", B, reps,
             kernels::to_string(kernels::best_isa()));
  fmt::print("{:<10}", "product");
  for (auto& k : kernels) fmt::print("{:>20}", k.first);
  fmt::print("\n");
  for (std::size_t p = 0; p < products.size(); ++p) {
    fmt::print("{:<10}", products[p].name);
    const double base = median(gflops[p][0]);
    for (std::size_t q = 0; q < kernels.size(); ++q) {
      const double g = median(gflops[p][q]);
      fmt::print("{:>20}", fmt::format("{:.1f} GF/s ({:.1f}x)", g, g / base));
    }
    fmt::print("\n");
  }

  // The per-batch copy of all MLP 784-256-128-10 weights next to its batch's work.
  const std::size_t weights = 784 * 256 + 256 * 128 + 128 * 10;
  std::vector<float> src = random(weights + 16), dst(weights);
  std::vector<double> copy_s;
  for (int r = 0; r < reps; ++r) {
    std::size_t calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    do {
      kernels::copy_from_shared(dst.data(), src.data(), weights);
      ++calls;
    } while ((s = seconds_since(t0)) < 0.1);
    copy_s.push_back(s / static_cast<double>(calls));
  }
  const double t = median(copy_s);
  fmt::print("copy of {} weights: {:.1f} us ({:.1f} GB/s); a batch of {} is {:.1f} MFLOP\n",
             weights, t * 1e6, static_cast<double>(weights) * 4 / t * 1e-9, B,
             static_cast<double>(B) * 2 * (2.0 * static_cast<double>(weights) + 256 * 128 + 128 * 10) * 1e-6);
  return 0;
}
