// bench_matmul_libs: our MLP products (src/kernels/) against Debian's oneDNN (what
// PyTorch's CPU path uses) and libxsmm (JIT kernels for small matrices), on the
// products of an MLP 784-256-128-10 step as src/models/mlp.cpp runs them, for batch
// 32 and 256, in fp32 and with bf16 operands (float sums):
//   forward   Z  (out x B)  = W · H
//   backward  D' (in x B)   = Wᵀ · D
//   update    W (out x in) += D · Hᵀ    (the SGD step fused into the gradient)
// H is the layer's input: the batch's rows (B x 784, row by row) under the first
// layer, the activations below (in x B) under the others, as the MLP keeps them.
// Everything runs single-threaded inside one forked child, as a hogwild worker does;
// the parent only waits for it. oneDNN is told to use one thread
// (omp_set_num_threads(1): Debian builds it on OpenMP), and the child reports its
// thread count at the end.
//   build/bench/bench_matmul_libs [--reps 7] [--seconds 0.05]
// prints, per product, GFLOP/s for each implementation (medians of interleaved
// repetitions, each a call repeated for --seconds) and its ratio to ours (> 1: the
// library is faster), as Markdown table rows.
//
// What each column times (A·B = C with the MLP's operands):
//   ours           kernels::gemm on the weights in place, private (serial mode, a
//                  replica); "ours live" the same with W as the live shared operand
//                  (hogwild: whole-lane reads of W, the step added in whole lanes)
//   oneDNN sgemm   dnnl_sgemm, transposes as flags (row-major BLAS interface)
//   oneDNN matmul  the matmul primitive, created once per shape, strided operands
//   libxsmm        libxsmm_smmdispatch's JIT kernel (column-major, A never
//                  transposed): where it needs H the other way round it gets a
//                  transposed copy made outside the timing (optimistic for it)
// and for bf16:
//   ours           kernels::bf16 pack_a + pack_b (fp32 -> bf16, live W read in whole
//                  lanes) + gemm with the MLP's epilogue, on bf16::best_unit()
//   ours product   the gemm alone on operands packed once
//   oneDNN matmul  conversion of both operands to plain bf16 (vcvtne2ps2bf16) + the
//                  matmul primitive (bf16 x bf16 -> f32); "oneDNN product" alone
//   libxsmm product libxsmm_bsmmdispatch's kernel on our packed operands (its VNNI
//                  A is our pair-layout B), alone; it has no transposed store and
//                  no alpha, so the backward product is stored untransposed and the
//                  update's -lr/B is left out (optimistic for it)
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

// fp32 -> bf16, round to nearest even, as oneDNN's operands; whole-lane loads.
__attribute__((target("avx512f,avx512bf16"))) void to_bf16_avx512(const float* src,
                                                                   std::uint16_t* dst,
                                                                   std::size_t n) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
    _mm512_storeu_si512(dst + i, (__m512i)v);
  }
  for (; i < n; ++i) dst[i] = bf::round(src[i]);
}
void to_bf16(const float* src, std::uint16_t* dst, std::size_t n) {
  if (__builtin_cpu_supports("avx512bf16")) return to_bf16_avx512(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf::round(src[i]);
}

// One product C (m x n, row stride ldc) = A (m x k) · B (k x n), or += (accumulate),
// on strided views; live: which operand is the shared W.
struct Product {
  std::size_t m, n, k;
  Matrix a, b;
  float* c;
  std::size_t ldc;
  bool accumulate;
  kernels::Live live;
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

  Product forward() {
    return {out, batch, in, {W.data(), sd(in), 1}, h(), Z.data(), batch, false, {true, false}};
  }
  Product backward() {
    return {in, batch, out, {W.data(), 1, sd(in)}, {D.data(), sd(batch), 1}, Dbelow.data(), batch,
            false, {true, false}};
  }
  Product update() {
    return {out, in, batch, {D.data(), sd(batch), 1}, ht(), W.data(), in, true, {false, true}};
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

void dnnl_sgemm_product(const Product& p) {
  // Row-major: an operand with unit column stride is 'N' with ld = its row stride,
  // one with unit row stride 'T' with ld = its column stride.
  const bool ta = p.a.cs != 1, tb = p.b.cs != 1;
  const auto lda = ta ? p.a.cs : p.a.rs, ldb = tb ? p.b.cs : p.b.rs;
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', static_cast<dnnl_dim_t>(p.m), static_cast<dnnl_dim_t>(p.n),
             static_cast<dnnl_dim_t>(p.k), 1.f, p.a.data, lda, p.b.data, ldb, p.accumulate ? 1.f : 0.f,
             p.c, static_cast<dnnl_dim_t>(p.ldc));
}

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
  auto buffer = [&](std::size_t n) { return buffers.emplace_back(n).data(); };
  std::string dnnl_f32_impl, dnnl_bf16_impl;
  const bool have_bf16 = bf::available();
  const float alpha = -0.1f / 32;  // -lr/B, the fused step's scale in bf16

  // Ratios: a library column against ours private; a live column against ours live.
  Table t32{{"ours", "ours live", "oneDNN sgemm", "oneDNN matmul", "libxsmm", "oneDNN sgemm live",
             "libxsmm live"},
            {-1, -1, 0, 0, 0, 1, 1},
            {}};
  // bf16: ours is the MLP's forms (the packing reads a live W in whole lanes, the
  // update adds into it in whole lanes: the same code serves private operands); the
  // products alone against each other.
  Table t16{{"ours", "oneDNN matmul", "libxsmm", "libxsmm live", "ours product", "oneDNN product",
             "libxsmm product"},
            {-1, 0, 0, 0, -1, 4, 4},
            {}};

  for (std::size_t batch : {32u, 256u})
    for (std::size_t l = 0; l < 3; ++l) {
      Layer& L = layers.emplace_back(widths[l], widths[l + 1], batch, l == 0, rng);
      float* Wc = buffer(L.W.size());  // a private copy of the live W (the libraries' live form)
      float* G = buffer(L.W.size());   // a private gradient, added to W in whole lanes
      float* T = buffer(L.H.size());   // H transposed for libxsmm
      for (int what = 0; what < 3; ++what) {
        const Product p = what == 0 ? L.forward() : what == 1 ? L.backward() : L.update();
        const std::string shape = fmt::format("B={} {}-{} {}", batch, L.in, L.out, kProducts[what]);
        const double flop = 2.0 * static_cast<double>(p.m * p.n * p.k);
        // -------- fp32
        Row r{shape, flop, {}};
        r.columns.push_back([p] { kernels::gemm(p.m, p.n, p.k, p.a, p.b, p.c, p.ldc, p.accumulate); });
        r.columns.push_back(
            [p] { kernels::gemm(p.m, p.n, p.k, p.a, p.b, p.c, p.ldc, p.accumulate, p.live); });
        r.columns.push_back([p] { dnnl_sgemm_product(p); });
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
        // Live W through the libraries: the forward copies it in whole lanes
        // (kernels::copy_from_shared; the backward reads that copy, uncharged), the
        // update computes into a private G and adds G in whole lanes.
        Product pl = p, pxl = px;
        if (what < 2) pl.a.data = pxl.a.data = Wc;
        if (what == 2) pl.c = pxl.c = G, pl.accumulate = pxl.accumulate = false;
        const float* W = L.W.data();
        float* Wlive = L.W.data();
        const std::size_t wn = L.W.size();
        r.columns.push_back([pl, what, W, Wlive, Wc, G, wn] {
          if (what == 0) kernels::copy_from_shared(Wc, W, wn);
          dnnl_sgemm_product(pl);
          if (what == 2) detail::dense_axpy_shared(Wlive, 1.f, G, wn);
        });
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

        // -------- bf16, each product as MlpModel::step_bf16 forms it
        Row q16{shape, flop, {}};
        Product q = p;  // the backward product batch-major, stored transposed
        bf::Epilogue epi = bf::Epilogue::store;
        if (what == 1) {
          q = {batch, L.in, L.out, {L.D.data(), 1, sd(batch)}, {L.W.data(), sd(L.in), 1},
               L.Dbelow.data(), batch, false, {false, false}};
          epi = bf::Epilogue::store_transposed;
        }
        if (what == 2) epi = bf::Epilogue::add_live;
        const bool live_a = what == 0, live_b = what == 1;
        auto& [pa, pb] = packs.emplace_back();
        q16.columns.push_back([q, epi, live_a, live_b, alpha, &pa, &pb] {
          bf::pack_a(q.m, q.k, q.a.data, q.a.rs, q.a.cs, pa, live_a);
          bf::pack_b(q.k, q.n, q.b.data, q.b.rs, q.b.cs, pb, live_b);
          bf::gemm(q.m, q.n, q.k, pa.data(), pb.data(), q.c, q.ldc, epi, alpha);
        });
        // oneDNN on the fp32 form of the product (strides are free to it), on plain
        // bf16 copies of the operands' storage, converted each call.
        const std::size_t a_size = p.a.data == L.W.data() ? L.W.size() : L.D.size();
        const std::size_t b_size = p.b.data == L.D.data() ? L.D.size() : L.H.size();
        auto a16 = std::make_shared<std::vector<std::uint16_t>>(a_size);
        auto b16 = std::make_shared<std::vector<std::uint16_t>>(b_size);
        to_bf16(p.a.data, a16->data(), a_size);
        to_bf16(p.b.data, b16->data(), b_size);
        DnnlMatmul& m16 = prims.emplace_back(p, dnnl::memory::data_type::bf16, what == 2 ? alpha : 1.f);
        dnnl_bf16_impl = m16.impl;
        q16.columns.push_back([p, &m16, a16, b16, a_size, b_size] {
          to_bf16(p.a.data, a16->data(), a_size);
          to_bf16(p.b.data, b16->data(), b_size);
          m16.run(a16->data(), b16->data(), p.c);
        });
        // libxsmm on our packed operands: its A = our packed B (VNNI pairs, lda =
        // pad(n, 16)), its B = our packed A (ldb = pad(k, 32)). It has no alpha and
        // no transposed store: the update scales D before packing, the backward
        // product goes to a scratch (B x in) and is transposed into place.
        auto dispatch = [&](bool beta1, std::size_t ldc) {
          const libxsmm_blasint lda = static_cast<libxsmm_blasint>(bf::pad(q.n, bf::kRows));
          const libxsmm_blasint ldb = static_cast<libxsmm_blasint>(bf::pad(q.k, bf::kDepth));
          const libxsmm_blasint c = static_cast<libxsmm_blasint>(ldc);
          const float one = 1, beta = beta1 ? 1.f : 0.f;
          const int flags = LIBXSMM_GEMM_FLAG_VNNI_A | (beta1 ? 0 : LIBXSMM_GEMM_FLAG_BETA_0);
          return libxsmm_bsmmdispatch(static_cast<libxsmm_blasint>(q.n), static_cast<libxsmm_blasint>(q.m),
                                      static_cast<libxsmm_blasint>(q.k), &lda, &ldb, &c, &one, &beta,
                                      &flags, nullptr);
        };
        const std::size_t ldc = what == 1 ? L.in : q.ldc;
        const libxsmm_bsmmfunction bk = dispatch(what == 2, ldc), bk0 = dispatch(false, ldc);
        float* S = buffer(std::max(L.W.size(), L.Dbelow.size()));  // scratch: C untransposed, or G
        float* Ds = buffer(L.D.size());                            // alpha · D
        const float* D = L.D.data();
        const std::size_t dn = L.D.size();
        auto& [xa, xb] = packs.emplace_back();
        auto libxsmm_bf16 = [q, what, live_a, live_b, alpha, &xa, &xb, S, Ds, D, dn, batch, L_in = L.in,
                             Wlive = L.W.data(), wn = L.W.size()](libxsmm_bsmmfunction f, bool live) {
          const float* a = q.a.data;
          if (what == 2 && !live) {  // private W: alpha goes into D, the kernel adds into W
            for (std::size_t i = 0; i < dn; ++i) Ds[i] = alpha * D[i];
            a = Ds;
          }
          bf::pack_a(q.m, q.k, a, q.a.rs, q.a.cs, xa, live_a);
          bf::pack_b(q.k, q.n, q.b.data, q.b.rs, q.b.cs, xb, live_b);
          float* out = what == 1 || (what == 2 && live) ? S : q.c;
          f(xb.data(), xa.data(), out);
          if (what == 1) transpose(S, batch, L_in, q.c);
          if (what == 2 && live) detail::dense_axpy_shared(Wlive, alpha, S, wn);
        };
        q16.columns.push_back(bk ? Run([libxsmm_bf16, bk] { libxsmm_bf16(bk, false); }) : Run());
        q16.columns.push_back(bk0 ? Run([libxsmm_bf16, bk, bk0, what] {
          libxsmm_bf16(what == 2 ? bk0 : bk, true);
        })
                                  : Run());
        // The products alone, on operands packed (or converted) once.
        auto& [qa, qb] = packs.emplace_back();
        bf::pack_a(q.m, q.k, q.a.data, q.a.rs, q.a.cs, qa);
        bf::pack_b(q.k, q.n, q.b.data, q.b.rs, q.b.cs, qb);
        q16.columns.push_back([q, epi, alpha, &qa, &qb] {
          bf::gemm(q.m, q.n, q.k, qa.data(), qb.data(), q.c, q.ldc, epi, alpha);
        });
        q16.columns.push_back([p, &m16, a16, b16] { m16.run(a16->data(), b16->data(), p.c); });
        float* out = what == 1 ? S : q.c;
        q16.columns.push_back(bk ? Run([bk, &qa, &qb, out] { bk(qb.data(), qa.data(), out); }) : Run());
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

  fmt::print("CPU: {}; bf16 products on {}; libxsmm target {}; oneDNN {}.{}.{}: fp32 matmul {}, "
             "bf16 matmul {}\n",
             cpu_model(), have_bf16 ? std::string(bf::to_string(bf::best_unit())) : "none",
             libxsmm_get_target_arch(), dnnl_version()->major, dnnl_version()->minor,
             dnnl_version()->patch, dnnl_f32_impl, have_bf16 ? dnnl_bf16_impl : "-");
  fmt::print("{} interleaved repetitions of {} s per cell, medians; GFLOP/s (ratio: a library "
             "against ours, its live form against ours live, a product alone against ours alone)\n",
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
