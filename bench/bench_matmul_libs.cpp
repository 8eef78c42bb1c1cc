// bench_matmul_libs: the MLP's products as src/models/mlp.cpp runs them (through
// oneDNN since 2026-11-24: src/kernels/gemm.hpp) against the alternatives, and
// softmax's byte-row dense layer (ours, src/kernels/dense_layer.cpp) against oneDNN:
// what docs/PERFORMANCE.md, "Kernels: ours or a library", decided from. The products
// of an MLP 784-256-128-10 step, batch 32 and 256, fp32 and bf16 operands (float
// sums):
//   forward   Z  (out x B)  = W · H
//   backward  D' (in x B)   = Wᵀ · D
//   update    W (out x in) += D · Hᵀ    (the SGD step fused into the gradient)
// H is the layer's input: the batch's rows (B x 784, row by row) under the first
// layer, the activations below (in x B) under the others, as the MLP keeps them.
// Everything runs single-threaded inside one forked child, as a hogwild worker does;
// the parent only waits for it. oneDNN runs on one thread (kernels::gemm sees to it;
// here omp_set_num_threads(1) for the direct calls), and the child reports its thread
// count at the end.
//   build/bench/bench_matmul_libs [--reps 9] [--seconds 0.05]
// prints, per product, GFLOP/s per column (medians of interleaved repetitions, each
// a call repeated for --seconds) with its ratio to the MLP's form (> 1: faster), and
// a whole-step row per batch size, as Markdown tables.
//
// Columns (A·B = C with the MLP's operands):
//   mlp            kernels::gemm as the MLP calls it: weights read in place (serial,
//                  lock, a replica); "mlp live" as under hogwild: the forward copies
//                  W in whole lanes (the backward reads that copy, uncharged), the
//                  update computes into a private G added to W in whole lanes
//   oneDNN matmul  the matmul primitive instead of dnnl_sgemm, created once per shape
//   libxsmm        libxsmm_smmdispatch's JIT kernel (column-major, A never
//                  transposed): the first layer's forward needs Xᵀ and the other
//                  layers' updates Hᵀ, transposed in each call; "libxsmm live" as
//                  "mlp live"
// and for bf16 (where the CPU has AVX512-BF16 or AMX):
//   mlp            kernels::to_bf16 of the product's new operands (W and H in the
//                  forward, D in the backward, or in the update below the first
//                  layer) + kernels::gemm (oneDNN's matmul, bf16 x bf16 -> f32, the
//                  update's alpha as its output scale); "mlp live": the update into G,
//                  added times alpha in whole lanes
//   AMX            our tiles as MlpModel::step_amx forms each product (packing
//                  included), where the CPU has them
// The measurements behind the switch to oneDNN (our former fp32 and AVX512-BF16
// kernels in the same table) were taken at commit 0054a29 of this file.
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <immintrin.h>
#include <libxsmm.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "hogwild/rng.hpp"
#include "hogwild/update_policy.hpp"
#include "kernels/dense_layer.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"

using namespace hogwild;
using kernels::Bf16Matrix;
using kernels::Matrix;
namespace bf = kernels::bf16;

namespace {

std::ptrdiff_t sd(std::size_t s) { return static_cast<std::ptrdiff_t>(s); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
}

std::size_t threads_of_this_process() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// One product C (m x n, row stride ldc) = A (m x k) · B (k x n), or += (accumulate),
// on strided views.
struct Product {
  std::size_t m, n, k;
  Matrix a, b;
  float* c;
  std::size_t ldc;
  bool accumulate;
};

// The operands of one layer at one batch size.
struct Layer {
  std::size_t in, out, batch;
  bool first;  // the input is the batch's rows (B x in), not activations (in x B)
  std::vector<float> W, H, Ht, D, Z, Dbelow, scratch;
  Layer(std::size_t in_, std::size_t out_, std::size_t batch_, bool first_, Rng& rng)
      : in(in_), out(out_), batch(batch_), first(first_) {
    auto random = [&](std::size_t n, float scale) {
      std::vector<float> v(n);
      for (auto& x : v) x = scale * static_cast<float>(rng.normal());
      return v;
    };
    W = random(out * in, 0.05f);
    H = random(in * batch, 1.f);  // first: B x in rows; else in x B
    // H the other way round (in x B for the first layer, B x in for the others).
    Ht.resize(in * batch);
    const std::size_t r = first ? batch : in, c = first ? in : batch;
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) Ht[j * r + i] = H[i * c + j];
    D = random(out * batch, 1e-6f);  // small: the update adds it to W over and over
    Z.resize(out * batch);
    Dbelow.resize(in * batch);
    scratch.resize(in * batch);
  }
  // H (in x B) and Hᵀ (B x in) as views of the stored input.
  Matrix h() const { return first ? Matrix{H.data(), 1, sd(in)} : Matrix{H.data(), sd(batch), 1}; }
  Matrix ht() const { return first ? Matrix{H.data(), sd(in), 1} : Matrix{H.data(), 1, sd(batch)}; }
  // The same from the transposed copy (libxsmm wants a unit column stride).
  Matrix h_unit() const { return first ? Matrix{Ht.data(), sd(batch), 1} : h(); }
  Matrix ht_unit() const { return first ? ht() : Matrix{Ht.data(), sd(in), 1}; }

  Product forward() { return {out, batch, in, {W.data(), sd(in), 1}, h(), Z.data(), batch, false}; }
  Product backward() {
    return {in, batch, out, {W.data(), 1, sd(in)}, {D.data(), sd(batch), 1}, Dbelow.data(), batch,
            false};
  }
  Product update() {
    return {out, in, batch, {D.data(), sd(batch), 1}, ht(), W.data(), in, true};
  }
};

const char* kProducts[] = {"forward", "backward", "update"};

// ---- oneDNN ----------------------------------------------------------------------

dnnl::memory::desc md(std::size_t rows, std::size_t cols, std::ptrdiff_t rs, std::ptrdiff_t cs,
                      dnnl::memory::data_type t) {
  return dnnl::memory::desc({static_cast<dnnl::memory::dim>(rows), static_cast<dnnl::memory::dim>(cols)},
                            t, {static_cast<dnnl::memory::dim>(rs), static_cast<dnnl::memory::dim>(cs)});
}

// A matmul primitive for one product, created once; run() executes it on the
// product's buffers (or on bf16 copies of them).
struct DnnlMatmul {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul prim;
  dnnl::memory src, weights, dst;
  std::string impl;
  DnnlMatmul(const Product& p, dnnl::memory::data_type t, float alpha) {
    const auto f32 = dnnl::memory::data_type::f32;
    const auto sm = md(p.m, p.k, p.a.rs, p.a.cs, t), wm = md(p.k, p.n, p.b.rs, p.b.cs, t);
    const auto dm = md(p.m, p.n, sd(p.ldc), 1, f32);
    dnnl::primitive_attr attr;
    if (alpha != 1) attr.set_output_scales(0, {alpha});
    if (p.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(sm, wm, dm), attr, engine);
    impl = pd.impl_info_str();
    prim = dnnl::matmul(pd);
    src = dnnl::memory(sm, engine, DNNL_MEMORY_NONE);
    weights = dnnl::memory(wm, engine, DNNL_MEMORY_NONE);
    dst = dnnl::memory(dm, engine, DNNL_MEMORY_NONE);
  }
  void run(const void* a, const void* b, float* c) {
    src.set_data_handle(const_cast<void*>(a));
    weights.set_data_handle(const_cast<void*>(b));
    dst.set_data_handle(c);
    prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
  }
};

// ---- libxsmm ---------------------------------------------------------------------

// Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: libxsmm's M = n, N = m, its A is our
// B read with unit column stride (lda = B's row stride), its B our A, 'N' when A has
// unit column stride and transposed ('TRANS_B') when A has unit row stride.
libxsmm_smmfunction xsmm_kernel(const Product& p) {
  const libxsmm_blasint lda = static_cast<libxsmm_blasint>(p.b.rs);
  const bool ta = p.a.cs != 1;
  const libxsmm_blasint ldb = static_cast<libxsmm_blasint>(ta ? p.a.cs : p.a.rs);
  const libxsmm_blasint ldc = static_cast<libxsmm_blasint>(p.ldc);
  const float alpha = 1, beta = p.accumulate ? 1.f : 0.f;
  const int flags = (ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0) | (p.accumulate ? 0 : LIBXSMM_GEMM_FLAG_BETA_0);
  return libxsmm_smmdispatch(static_cast<libxsmm_blasint>(p.n), static_cast<libxsmm_blasint>(p.m),
                             static_cast<libxsmm_blasint>(p.k), &lda, &ldb, &ldc, &alpha, &beta,
                             &flags, nullptr);
}

// ---- helpers for the libraries' adaptations -----------------------------------------

// dst (cols x rows) = src (rows x cols)ᵀ, in 16 x 16 blocks.
void transpose(const float* src, std::size_t rows, std::size_t cols, float* dst) {
  for (std::size_t i0 = 0; i0 < rows; i0 += 16)
    for (std::size_t j0 = 0; j0 < cols; j0 += 16)
      for (std::size_t i = i0; i < std::min(rows, i0 + 16); ++i)
        for (std::size_t j = j0; j < std::min(cols, j0 + 16); ++j) dst[j * rows + i] = src[i * cols + j];
}

// ---- the table ---------------------------------------------------------------------

using Run = std::function<void()>;
struct Row {
  std::string label;
  double flop;
  std::vector<Run> columns;  // empty: not available here
};
struct Table {
  std::vector<std::string> names;
  std::vector<int> baseline;  // per column: the column its ratio is against (-1: none)
  std::vector<Row> rows;
};

void measure(Table& t, int reps, double seconds, std::vector<std::vector<std::vector<double>>>& g) {
  g.assign(t.rows.size(), std::vector<std::vector<double>>(t.names.size()));
  for (int rep = 0; rep < reps; ++rep)
    for (std::size_t r = 0; r < t.rows.size(); ++r)
      for (std::size_t c = 0; c < t.names.size(); ++c) {
        const Run& run = t.rows[r].columns[c];
        if (!run) continue;
        run();  // warm
        std::size_t calls = 0;
        const auto t0 = std::chrono::steady_clock::now();
        double s = 0;
        do {
          run();
          ++calls;
        } while ((s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) <
                 seconds);
        g[r][c].push_back(t.rows[r].flop * static_cast<double>(calls) / s * 1e-9);
      }
}

// One row of medians (GFLOP/s; 0: not measured), each with its ratio to its baseline.
void print_row(const Table& t, const std::string& label, const std::vector<double>& v) {
  fmt::print("| {} |", label);
  for (std::size_t c = 0; c < v.size(); ++c) {
    const int b = t.baseline[c];
    if (v[c] == 0)
      fmt::print(" - |");
    else if (b < 0 || v[static_cast<std::size_t>(b)] == 0)
      fmt::print(" {:.1f} |", v[c]);
    else
      fmt::print(" {:.1f} ({:.2f}x) |", v[c], v[c] / v[static_cast<std::size_t>(b)]);
  }
  fmt::print("\n");
}

// The products, then per batch size the whole step: all its products' medians
// as one time (sum of flop / sum of seconds).
void print(const Table& t, const std::vector<std::vector<std::vector<double>>>& g) {
  std::string head = "| product |", rule = "|---|";
  for (const auto& n : t.names) head += " " + n + " |", rule += "---|";
  fmt::print("\n{}\n{}\n", head, rule);
  const std::size_t per_step = 9;  // 3 layers x 3 products
  for (std::size_t r0 = 0; r0 < t.rows.size(); r0 += per_step) {
    std::vector<double> flop(t.names.size(), 0), seconds(t.names.size(), 0);
    for (std::size_t r = r0; r < std::min(t.rows.size(), r0 + per_step); ++r) {
      std::vector<double> v(t.names.size(), 0);
      for (std::size_t c = 0; c < t.names.size(); ++c) {
        if (g[r][c].empty()) {
          seconds[c] = -1e300;  // the step's sum is not measured either
          continue;
        }
        v[c] = median(g[r][c]);
        flop[c] += t.rows[r].flop;
        seconds[c] += t.rows[r].flop / (v[c] * 1e9);
      }
      print_row(t, t.rows[r].label, v);
    }
    std::vector<double> step(t.names.size(), 0);
    for (std::size_t c = 0; c < t.names.size(); ++c)
      if (seconds[c] > 0) step[c] = flop[c] / seconds[c] * 1e-9;
    const std::string batch = t.rows[r0].label.substr(0, t.rows[r0].label.find(' '));
    print_row(t, "**" + batch + " whole step**", step);
  }
}

int child(int reps, double seconds) {
  omp_set_num_threads(1);
  libxsmm_init();
  Rng rng(7);
  const std::size_t widths[] = {784, 256, 128, 10};
  std::deque<Layer> layers;
  std::deque<DnnlMatmul> prims;
  std::deque<std::pair<bf::Packed, bf::Packed>> packs;  // captured by reference
  std::deque<std::vector<float>> buffers;               // likewise
  std::deque<std::vector<std::uint16_t>> buffers16;     // likewise
  auto buffer = [&](std::size_t n) { return buffers.emplace_back(n).data(); };
  std::string dnnl_f32_impl;
  const float alpha = -0.1f / 32;  // -lr/B, the fused step's scale in bf16

  // Ratios: against the MLP's form, private or live.
  Table t32{{"mlp", "mlp live", "oneDNN matmul", "libxsmm", "libxsmm live"}, {-1, -1, 0, 0, 1}, {}};
  Table t16{{"mlp", "mlp live", "AMX"}, {-1, -1, 0}, {}};
  const bool have_bf16 = kernels::bf16_supported() || bf::available();

  for (std::size_t batch : {32u, 256u})
    for (std::size_t l = 0; l < 3; ++l) {
      Layer& L = layers.emplace_back(widths[l], widths[l + 1], batch, l == 0, rng);
      float* Wc = buffer(L.W.size());  // a private copy of the live W
      float* G = buffer(L.W.size());   // a private gradient, added to W in whole lanes
      float* T = buffer(L.H.size());   // H transposed for libxsmm
      for (int what = 0; what < 3; ++what) {
        const Product p = what == 0 ? L.forward() : what == 1 ? L.backward() : L.update();
        const std::string shape = fmt::format("B={} {}-{} {}", batch, L.in, L.out, kProducts[what]);
        const double flop = 2.0 * static_cast<double>(p.m * p.n * p.k);
        const float* W = L.W.data();
        float* Wlive = L.W.data();
        const std::size_t wn = L.W.size();
        // -------- fp32
        Row r{shape, flop, {}};
        r.columns.push_back([p] { kernels::gemm(p.m, p.n, p.k, p.a, p.b, p.accumulate, p.c, p.ldc); });
        Product pl = p;  // the live form's product: on the copy, or into G
        if (what < 2) pl.a.data = Wc;
        if (what == 2) pl.c = G, pl.accumulate = false;
        r.columns.push_back([pl, what, W, Wlive, Wc, G, wn] {
          if (what == 0) kernels::copy_from_shared(Wc, W, wn);
          kernels::gemm(pl.m, pl.n, pl.k, pl.a, pl.b, pl.accumulate, pl.c, pl.ldc);
          if (what == 2) detail::dense_axpy_shared(Wlive, 1.f, G, wn);
        });
        DnnlMatmul& m32 = prims.emplace_back(p, dnnl::memory::data_type::f32, 1.f);
        dnnl_f32_impl = m32.impl;
        r.columns.push_back([p, &m32] { m32.run(p.a.data, p.b.data, p.c); });
        // libxsmm's A (our B) needs a unit column stride: the first layer's forward
        // reads Xᵀ, the others' updates Hᵀ, transposed here each call.
        const bool needs_t = (what == 0 && L.first) || (what == 2 && !L.first);
        Product px = p;
        if (needs_t) px.b = what == 0 ? Matrix{T, sd(batch), 1} : Matrix{T, sd(L.in), 1};
        const float* h = L.H.data();
        const std::size_t hr = L.first ? batch : L.in, hc = L.first ? L.in : batch;
        const libxsmm_smmfunction k = xsmm_kernel(px);
        r.columns.push_back(k ? Run([px, k, needs_t, h, hr, hc, T] {
          if (needs_t) transpose(h, hr, hc, T);
          k(px.b.data, px.a.data, px.c);
        })
                              : Run());
        Product pxl = px;
        if (what < 2) pxl.a.data = Wc;
        if (what == 2) pxl.c = G, pxl.accumulate = false;
        const libxsmm_smmfunction kl = xsmm_kernel(pxl);
        r.columns.push_back(kl ? Run([pxl, kl, what, needs_t, h, hr, hc, T, W, Wlive, Wc, G, wn] {
          if (what == 0) kernels::copy_from_shared(Wc, W, wn);
          if (needs_t) transpose(h, hr, hc, T);
          kl(pxl.b.data, pxl.a.data, pxl.c);
          if (what == 2) detail::dense_axpy_shared(Wlive, 1.f, G, wn);
        })
                               : Run());
        t32.rows.push_back(std::move(r));
        if (!have_bf16) continue;

        // -------- bf16: the MLP's form converts each operand once per step, where it
        // first appears (W and H in the forward, D in the backward); the update of a
        // live W goes through G.
        Row q16{shape, flop, {}};
        auto* w16 = &buffers16.emplace_back(L.W.size());
        auto* h16 = &buffers16.emplace_back(L.H.size());
        auto* d16 = &buffers16.emplace_back(L.D.size());
        kernels::to_bf16(L.W.data(), L.W.size(), w16->data());
        kernels::to_bf16(L.H.data(), L.H.size(), h16->data());
        kernels::to_bf16(L.D.data(), L.D.size(), d16->data());
        const Bf16Matrix a16{what == 2 ? d16->data() : w16->data(), p.a.rs, p.a.cs};
        const Bf16Matrix b16{what == 1 ? d16->data() : h16->data(), p.b.rs, p.b.cs};
        const float* H = L.H.data();
        const float* D = L.D.data();
        const std::size_t hn = L.H.size(), dn = L.D.size();
        const bool first = L.first;
        auto mlp16 = [p, what, first, a16, b16, w16, h16, d16, W, H, D, wn, hn, dn, alpha, Wlive,
                      G](bool live) {
          if (what == 0) kernels::to_bf16(W, wn, w16->data()), kernels::to_bf16(H, hn, h16->data());
          if (what == 1 || (what == 2 && first)) kernels::to_bf16(D, dn, d16->data());
          const bool update = what == 2, into_g = update && live;
          kernels::gemm(p.m, p.n, p.k, a16, b16, p.accumulate && !into_g, into_g ? G : p.c, p.ldc,
                        update && !live ? alpha : 1.f);
          if (into_g) detail::dense_axpy_shared(Wlive, alpha, G, wn);
        };
        if (kernels::bf16_supported()) {
          q16.columns.push_back([mlp16] { mlp16(false); });
          q16.columns.push_back([mlp16] { mlp16(true); });
        } else {
          q16.columns.push_back(Run());
          q16.columns.push_back(Run());
        }
        if (bf::available()) {  // as MlpModel::step_amx: the backward batch-major, stored transposed
          Product q = p;
          bf::Epilogue epi = what == 2 ? bf::Epilogue::add_live : bf::Epilogue::store;
          if (what == 1) {
            q = {batch, L.in, L.out, {L.D.data(), 1, sd(batch)}, {L.W.data(), sd(L.in), 1},
                 L.Dbelow.data(), batch, false};
            epi = bf::Epilogue::store_transposed;
          }
          const bool live_a = what == 0, live_b = what == 1;
          auto& [pa, pb] = packs.emplace_back();
          q16.columns.push_back([q, epi, live_a, live_b, alpha, &pa, &pb] {
            bf::pack_a(q.m, q.k, q.a.data, q.a.rs, q.a.cs, pa, live_a);
            bf::pack_b(q.k, q.n, q.b.data, q.b.rs, q.b.cs, pb, live_b);
            bf::gemm(q.m, q.n, q.k, pa.data(), pb.data(), q.c, q.ldc, epi, alpha);
          });
        } else {
          q16.columns.push_back(Run());
        }
        t16.rows.push_back(std::move(q16));
      }
    }

  // Softmax 784-10 on byte rows (src/kernels/dense_layer.cpp): per row all classes'
  // dots, then the batch's outer-product update of W, reading the pixels in place
  // through a pointer per row; the rows of each call are the next B of 20000 in
  // shuffled order. oneDNN widens the batch to floats first (kernels::widen_bytes),
  // then Z = X·Wᵀ and W += Cᵀ·X; its live form copies W and adds a private G.
  Table tsm{{"ours", "oneDNN sgemm", "oneDNN sgemm live"}, {-1, 0, 0}, {}};
  const std::size_t sm_rows = 20000, sm_in = 784, sm_out = 10;
  std::vector<std::uint8_t> pixels(sm_rows * sm_in);
  for (auto& x : pixels) x = static_cast<std::uint8_t>(rng.below(256));
  std::vector<std::uint32_t> order(sm_rows);
  for (std::uint32_t i = 0; i < sm_rows; ++i) order[i] = i;
  for (std::size_t i = sm_rows; i-- > 1;) std::swap(order[i], order[rng.below(i + 1)]);
  for (std::size_t batch : {1u, 32u, 256u}) {  // 1: hogwild_train's default batch
    auto st = std::make_shared<std::size_t>(0);  // the next batch's first position
    float* Wsm = buffer(sm_out * sm_in);
    for (std::size_t i = 0; i < sm_out * sm_in; ++i) Wsm[i] = 0.01f * static_cast<float>(rng.normal());
    float* Wcp = buffer(sm_out * sm_in);
    float* Gsm = buffer(sm_out * sm_in);
    float* Xsm = buffer(batch * sm_in);
    float* Zsm = buffer(batch * sm_out);
    float* coeff = buffer(batch * sm_out);
    for (std::size_t i = 0; i < batch * sm_out; ++i) coeff[i] = 1e-6f * static_cast<float>(rng.normal());
    auto rows = std::make_shared<std::vector<const std::uint8_t*>>(batch);
    const std::uint8_t* px = pixels.data();
    const std::uint32_t* ord = order.data();
    auto next = [st, rows, px, ord, batch] {
      if (*st + batch > sm_rows) *st = 0;
      for (std::size_t b = 0; b < batch; ++b) (*rows)[b] = px + std::size_t{ord[*st + b]} * sm_in;
      *st += batch;
    };
    Row r{fmt::format("B={} softmax {}-{} forward + update", batch, sm_in, sm_out),
          4.0 * static_cast<double>(batch * sm_in * sm_out), {}};
    r.columns.push_back([next, rows, batch, Wsm, Zsm, coeff] {
      next();
      for (std::size_t b = 0; b < batch; ++b)
        detail::dense_multi_dot_shared(Wsm, sm_in, sm_out, (*rows)[b], sm_in, Zsm + b * sm_out);
      detail::dense_outer_update_shared(Wsm, sm_in, sm_out, coeff, sm_out, rows->data(), batch, sm_in);
    });
    auto library = [next, rows, batch, Wsm, Wcp, Gsm, Xsm, Zsm, coeff](bool live) {
      next();
      for (std::size_t b = 0; b < batch; ++b) kernels::widen_bytes(Xsm + b * sm_in, (*rows)[b], sm_in);
      const float* w = Wsm;
      if (live) kernels::copy_from_shared(Wcp, Wsm, sm_out * sm_in), w = Wcp;
      dnnl_sgemm('N', 'T', dnnl_dim_t(batch), sm_out, sm_in, 1.f, Xsm, sm_in, w, sm_in, 0.f, Zsm, sm_out);
      dnnl_sgemm('T', 'N', sm_out, sm_in, dnnl_dim_t(batch), 1.f, coeff, sm_out, Xsm, sm_in,
                 live ? 0.f : 1.f, live ? Gsm : Wsm, sm_in);
      if (live) detail::dense_axpy_shared(Wsm, 1.f, Gsm, sm_out * sm_in);
    };
    r.columns.push_back([library] { library(false); });
    r.columns.push_back([library] { library(true); });
    tsm.rows.push_back(std::move(r));
  }

  std::vector<std::vector<std::vector<double>>> g32, g16, gsm;
  // fp32 and bf16 interleaved too: one repetition of each table at a time.
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<std::vector<std::vector<double>>> a, b;
    std::vector<std::vector<std::vector<double>>> c;
    measure(tsm, 1, seconds, c);
    for (std::size_t r = 0; r < c.size(); ++r)
      for (std::size_t k = 0; k < c[r].size(); ++k) {
        if (rep == 0) gsm.resize(c.size(), std::vector<std::vector<double>>(c[r].size()));
        gsm[r][k].insert(gsm[r][k].end(), c[r][k].begin(), c[r][k].end());
      }
    measure(t32, 1, seconds, a);
    if (have_bf16) measure(t16, 1, seconds, b);
    if (rep == 0) {
      g32 = a;
      g16 = b;
      continue;
    }
    for (std::size_t r = 0; r < a.size(); ++r)
      for (std::size_t c = 0; c < a[r].size(); ++c) g32[r][c].insert(g32[r][c].end(), a[r][c].begin(), a[r][c].end());
    for (std::size_t r = 0; r < b.size(); ++r)
      for (std::size_t c = 0; c < b[r].size(); ++c) g16[r][c].insert(g16[r][c].end(), b[r][c].begin(), b[r][c].end());
  }

  fmt::print("CPU: {}; bf16: oneDNN {}, AMX {}; libxsmm target {}; oneDNN {}.{}.{} (its fp32 "
             "matmul: {})\n",
             cpu_model(), kernels::bf16_supported() ? "yes" : kernels::bf16_unsupported_reason(),
             bf::available() ? "yes" : bf::unavailable_reason(), libxsmm_get_target_arch(),
             dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch, dnnl_f32_impl);
  fmt::print("{} interleaved repetitions of {} s per cell, medians; GFLOP/s (ratio: against "
             "the MLP's form, live against live)\n",
             reps, seconds);
  fmt::print("\nfp32\n");
  print(t32, g32);
  if (have_bf16) {
    fmt::print("\nbf16 operands, float sums\n");
    print(t16, g16);
  }
  fmt::print("\nsoftmax's dense layer on byte rows\n\n| product | ours | oneDNN sgemm | oneDNN sgemm live |\n|---|---|---|---|\n");
  for (std::size_t r = 0; r < tsm.rows.size(); ++r) {
    std::vector<double> v;
    for (const auto& x : gsm[r]) v.push_back(median(x));
    print_row(tsm, tsm.rows[r].label, v);
  }
  fmt::print("\nthreads in the worker: {}\n", threads_of_this_process());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  double seconds = 0.05;
  CLI::App app{"Our MLP products against oneDNN and libxsmm, one thread in a forked worker"};
  app.add_option("--reps", reps, "Interleaved repetitions (median reported)")->capture_default_str();
  app.add_option("--seconds", seconds, "Seconds per timing")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) _exit(child(reps, seconds));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
