// The MLP: its step against finite differences of its loss (dense and sparse rows,
// batch 1 and mini-batches, L2), every mode's single-process step alike, batched
// evaluation equal to per-row prediction, two Hogwild! workers converging like
// serial SGD, and the CLI's --hidden checks; the same for --matmul-precision bf16
// where the CPU has a bf16 unit (AMX tiles or AVX512-BF16).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/optimizer.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "owned_params.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

using Owned = test::OwnedParams;

Dataset rows_of(bool dense) {
  Rng rng(7);
  std::vector<float> labels{0, 1, 2, 1, 0};
  if (dense) {
    std::vector<float> val(5 * 11);
    for (auto& v : val) v = static_cast<float>(rng.normal());
    return Dataset::dense(labels, val, 11, "dense");
  }
  std::vector<std::uint64_t> off{0, 3, 5, 8, 10, 12};
  std::vector<std::uint32_t> idx{0, 2, 5, 1, 2, 0, 3, 4, 4, 5, 1, 3};
  std::vector<float> val(idx.size());
  for (auto& v : val) v = static_cast<float>(rng.normal());
  return Dataset::sparse(labels, off, idx, val, 6, "sparse");
}

// Mean loss of the batch plus the L2 term lambda/2 ||W||^2 on the weight tensors.
double objective(const MlpModel& m, const ParamSet& p, const Batch& b, float l2) {
  double penalty = 0;
  for (auto& t : p.tensors())
    if (t.name[0] == 'W')
      for (std::size_t j = 0; j < t.size; ++j) penalty += 0.5 * l2 * t.data[j] * t.data[j];
  return test::batch_loss(m, p, b) + penalty;
}

struct Setup {
  Dataset data;
  MlpModel model;
  std::vector<float> targets;
  Setup(bool dense, float l2, std::vector<std::size_t> hidden)
      : data(rows_of(dense)), model(ModelOptions{l2, true, std::move(hidden)}) {
    auto labels = LabelMap::fit(model.label_kind(), data, "mlp");
    model.configure(Problem{data.cols(), labels.classes(), data.layout()});
    targets = labels.targets(data);
  }
};

}  // namespace

TEST_CASE("mlp: gradient matches finite differences") {
  for (bool dense : {true, false})
    for (float l2 : {0.f, 0.1f})
      for (std::vector<std::uint32_t> rows : {std::vector<std::uint32_t>{2}, {0, 1, 3, 4}}) {
        Setup s(dense, l2, {7, 5});
        Owned base(s.model.parameters(), 11), stepped(base);
        Batch b{&s.data, s.targets.data(), rows.data(), rows.size()};
        s.model.step<Update<SerialUpdate, Sgd>>(b, stepped.set, 1.0f);
        INFO((dense ? "dense" : "sparse") << " l2 " << l2 << " batch " << rows.size());
        const double eps = 1e-3;
        for (std::size_t t = 0; t < base.store.size(); ++t)
          for (std::size_t j = 0; j < base.store[t].size(); ++j) {
            Owned plus(base), minus(base);
            plus.store[t][j] += static_cast<float>(eps);
            minus.store[t][j] -= static_cast<float>(eps);
            const double numeric = (objective(s.model, plus.set, b, l2) -
                                    objective(s.model, minus.set, b, l2)) / (2 * eps);
            INFO(base.set.tensor(t).name << "[" << j << "]");
            CHECK(base.store[t][j] - stepped.store[t][j] ==
                  doctest::Approx(numeric).epsilon(2e-2).scale(0.05));
          }
      }
}

TEST_CASE("mlp: every update mode computes the same single-process step") {
  // Hidden widths past one register tile (and not a multiple of it), so that the
  // live kernel's whole-lane tiles and its edge columns both run.
  Setup s(true, 0.01f, {37});
  Owned base(s.model.parameters(), 5), h(base), a(base), l(base), serial(base);
  // The same tensors marked exclusive (a worker's replica): hogwild and atomic then
  // compute in place without the live operands or the copy.
  Owned hx(base), ax(base);
  const ParamSet hx_set(hx.set.tensors(), true), ax_set(ax.set.tensors(), true);
  std::vector<std::uint32_t> rows{0, 1, 2, 3, 4};
  Batch b{&s.data, s.targets.data(), rows.data(), rows.size()};
  s.model.step<Update<SerialUpdate, Sgd>>(b, serial.set, 0.3f);
  s.model.step<Update<HogwildUpdate, Sgd>>(b, h.set, 0.3f);
  s.model.step<Update<AtomicUpdate, Sgd>>(b, a.set, 0.3f);
  s.model.step<Update<LockUpdate, Sgd>>(b, l.set, 0.3f);
  s.model.step<Update<HogwildUpdate, Sgd>>(b, hx_set, 0.3f);
  s.model.step<Update<AtomicUpdate, Sgd>>(b, ax_set, 0.3f);
  int changed = 0;
  for (std::size_t t = 0; t < base.store.size(); ++t)
    for (std::size_t i = 0; i < base.store[t].size(); ++i) {
      const float want = serial.store[t][i];
      changed += want != base.store[t][i];
      CHECK(h.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
      CHECK(a.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
      CHECK(l.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
      CHECK(hx.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
      CHECK(ax.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
    }
  CHECK(changed > 400);  // the step moved (nearly) every weight
}

TEST_CASE("mlp: AdaGrad divides each coordinate's gradient by its accumulated norm") {
  Setup s(true, 0.05f, {6});
  Owned base(s.model.parameters(), 3), sgd(base), ada(base);
  std::vector<std::vector<float>> G;
  std::vector<ParamSet::Tensor> with_state;
  for (std::size_t t = 0; t < ada.store.size(); ++t) {
    G.emplace_back(ada.store[t].size(), 0.f);
    with_state.push_back({ada.set[t].name, ada.store[t].data(), ada.store[t].size(), G[t].data()});
  }
  const ParamSet ada_set(std::move(with_state));
  std::vector<std::uint32_t> rows{0, 2, 3};
  Batch b{&s.data, s.targets.data(), rows.data(), rows.size()};
  s.model.step<Update<SerialUpdate, Sgd>>(b, sgd.set, 1.0f);  // w - g
  s.model.step<Update<HogwildUpdate, AdaGrad>>(b, ada_set, 0.1f);
  for (std::size_t t = 0; t < base.store.size(); ++t)
    for (std::size_t i = 0; i < base.store[t].size(); ++i) {
      const double g = base.store[t][i] - sgd.store[t][i];
      INFO(base.set[t].name << "[" << i << "] g " << g);
      CHECK(G[t][i] == doctest::Approx(g * g).epsilon(1e-3).scale(1e-6));
      const double want = std::abs(g) < 1e-5 ? 0.0 : 0.1 * g / std::abs(g);
      CHECK(base.store[t][i] - ada.store[t][i] == doctest::Approx(want).epsilon(1e-3).scale(1e-3));
    }
}

TEST_CASE("mlp: batched evaluation equals per-row prediction") {
  for (bool dense : {true, false}) {
    Setup s(dense, 0, {6, 4});
    Owned p(s.model.parameters(), 9);
    Evaluation e = s.model.evaluate(p.set, s.data, s.targets.data());
    double loss = 0;
    std::size_t correct = 0;
    for (std::size_t r = 0; r < s.data.rows(); ++r) {
      double l;
      bool ok;
      s.model.predict(p.set, s.data.row(r), s.targets[r], l, ok);
      loss += l;
      correct += ok;
    }
    CHECK(e.rows == s.data.rows());
    CHECK(e.loss == doctest::Approx(loss / 5).epsilon(1e-5));
    CHECK(e.accuracy == doctest::Approx(static_cast<double>(correct) / 5));
  }
}

namespace {

// Train/test halves of Fashion-MNIST's test file where installed (a real image
// problem in a second), else three rings in the plane padded with noise features:
// no linear model separates them.
std::pair<Dataset, Dataset> problem() {
  const std::filesystem::path fm = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  if (std::filesystem::exists(fm)) {
    Dataset all = load_dataset(fm.string());
    return {test::slice(all, 0, 6000, "fashion-train"), test::slice(all, 6000, 10000, "fashion-test")};
  }
  MESSAGE("Fashion-MNIST not installed: generated rings instead");
  auto make = [](std::size_t n, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<float> labels, values;
    for (std::size_t i = 0; i < n; ++i) {
      const int k = static_cast<int>(rng.below(3));
      const double r = 0.5 + k + 0.3 * rng.uniform(), a = 6.283185307179586 * rng.uniform();
      values.push_back(static_cast<float>(r * std::cos(a)));
      values.push_back(static_cast<float>(r * std::sin(a)));
      for (int j = 0; j < 8; ++j) values.push_back(static_cast<float>(rng.normal()));
      labels.push_back(static_cast<float>(k));
    }
    return Dataset::dense(labels, values, 10, "rings");
  };
  return {make(6000, 1), make(2000, 2)};
}

}  // namespace

TEST_CASE("mlp: two Hogwild! workers (SGD, AdaGrad) reach serial SGD's accuracy") {
  auto [train_set, test_set] = problem();
  TrainConfig c;
  c.model = "mlp";
  c.model_options.hidden = {64};
  c.epochs = 10;  // near convergence: early epochs vary by points from run to run
  c.batch = 16;
  c.step_size.lr0 = 0.1f;
  c.step_size.decay = 0.8f;
  c.mode = Mode::serial;
  const auto serial = train(c, train_set, &test_set);
  c.mode = Mode::hogwild;
  c.workers = 2;
  const auto hogwild = train(c, train_set, &test_set);
  c.optimizer = Optimizer::adagrad;
  c.step_size.lr0 = 0.01f;
  const auto adagrad = train(c, train_set, &test_set);
  MESSAGE("serial " << serial.test.accuracy << ", hogwild x2 " << hogwild.test.accuracy
                    << ", hogwild x2 adagrad " << adagrad.test.accuracy);
  CHECK(adagrad.test.accuracy > serial.test.accuracy - 0.05);
  CHECK(serial.test.accuracy > 0.75);
  CHECK(hogwild.test.accuracy > serial.test.accuracy - 0.03);
  CHECK(hogwild.parameters.count("W1") == 1);
  CHECK(hogwild.parameters.count("b2") == 1);
}

TEST_CASE("mlp: hogwild_train rejects bad --hidden values with exit status 2") {
  test::TempDir dir;
  auto [tr, te] = test::generated_problem(200, 50, 30, 5, 0.0, 3);
  write_libsvm(tr, dir.file("train.svm"));
  for (const char* bad : {"", "0", "256,,128", "-5", "12a", "256, 128", "99999999"}) {
    auto r = test::run({test::hogwild_train_path(), "--train", dir.file("train.svm"), "--model",
                        "mlp", "--hidden", bad, "--epochs", "1"});
    INFO("--hidden \"" << std::string(bad) << "\": " << r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("--hidden expects comma-separated positive layer widths") != std::string::npos);
  }
  auto ok = test::run({test::hogwild_train_path(), "--train", dir.file("train.svm"), "--model",
                       "mlp", "--hidden", "8,4", "--epochs", "1", "-q"});
  CHECK_MESSAGE(ok.exit_code == 0, ok.out);
}

// --matmul-precision bf16: the products on bf16 operands, on our AMX tiles
// (kernels/gemm_bf16.hpp) or through oneDNN on AVX512-BF16 (kernels/gemm.hpp).
// Skipped where the CPU has neither (or the kernel does not grant the tiles).
namespace {
bool bf16_runs() { return kernels::bf16::available() || kernels::bf16_supported(); }
}  // namespace

TEST_CASE("mlp bf16: a step equals the fp32 step to within bf16 rounding, alike in every mode" * doctest::test_suite("bf16")) {
  if (!bf16_runs()) {
    test::skip(kernels::bf16::unavailable_reason() + "; " + kernels::bf16_unsupported_reason());
    return;
  }
  Setup s(true, 0.01f, {37});
  ModelOptions bo{0.01f, true, {37}};
  bo.matmul = MatmulPrecision::bf16;
  MlpModel bf(bo);
  bf.configure(Problem{s.data.cols(), 3, s.data.layout()});
  Owned base(s.model.parameters(), 5), fp(base), serial(base), h(base), a(base), l(base), hx(base);
  const ParamSet hx_set(hx.set.tensors(), true);
  std::vector<std::uint32_t> rows{0, 1, 2, 3, 4};
  Batch b{&s.data, s.targets.data(), rows.data(), rows.size()};
  const double fp_loss = s.model.step<Update<SerialUpdate, Sgd>>(b, fp.set, 0.3f);
  const double bf_loss = bf.step<Update<SerialUpdate, Sgd>>(b, serial.set, 0.3f);
  bf.step<Update<HogwildUpdate, Sgd>>(b, h.set, 0.3f);
  bf.step<Update<AtomicUpdate, Sgd>>(b, a.set, 0.3f);
  bf.step<Update<LockUpdate, Sgd>>(b, l.set, 0.3f);
  bf.step<Update<HogwildUpdate, Sgd>>(b, hx_set, 0.3f);
  CHECK(bf_loss == doctest::Approx(fp_loss).epsilon(1e-2));
  int rounded = 0;
  double largest = 0;
  for (std::size_t t = 0; t < base.store.size(); ++t)
    for (std::size_t i = 0; i < base.store[t].size(); ++i)
      largest = std::max(largest, std::abs(double(fp.store[t][i]) - base.store[t][i]));
  for (std::size_t t = 0; t < base.store.size(); ++t)
    for (std::size_t i = 0; i < base.store[t].size(); ++i) {
      INFO(base.set[t].name << "[" << i << "]");
      const double want = fp.store[t][i] - base.store[t][i];  // the fp32 step
      const double got = serial.store[t][i] - base.store[t][i];
      // bf16 keeps 8 significant bits: each product term is off by at most 2^-8
      // relative, so the step by a few per cent of the largest step at most.
      CHECK(std::abs(got - want) <= 0.03 * largest);
      rounded += got != want;
      const float same = serial.store[t][i];
      CHECK(h.store[t][i] == doctest::Approx(same).epsilon(1e-5).scale(1e-5));
      CHECK(a.store[t][i] == doctest::Approx(same).epsilon(1e-5).scale(1e-5));
      CHECK(l.store[t][i] == doctest::Approx(same).epsilon(1e-5).scale(1e-5));
      CHECK(hx.store[t][i] == doctest::Approx(same).epsilon(1e-5).scale(1e-5));
    }
  CHECK(rounded > 100);  // the products did run on rounded operands
}

TEST_CASE("mlp bf16: a batch of byte rows steps as the same rows in floats" * doctest::test_suite("bf16")) {
  if (!bf16_runs()) {
    test::skip(kernels::bf16::unavailable_reason() + "; " + kernels::bf16_unsupported_reason());
    return;
  }
  Rng rng(3);
  const std::size_t rows = 40, cols = 50;  // a batch past one tile of rows and columns
  std::vector<float> labels(rows), floats(rows * cols);
  std::vector<std::uint8_t> pixels(rows * cols);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<float>(i % 3);
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<std::uint8_t>(rng.below(256));
    floats[i] = static_cast<float>(pixels[i]) * (1.0f / 255.0f);
  }
  const Dataset bytes = Dataset::dense_u8(labels, pixels, cols, "bytes");
  const Dataset dense = Dataset::dense(labels, floats, cols, "floats");
  ModelOptions o{0, true, {20}};
  o.matmul = MatmulPrecision::bf16;
  MlpModel m(o);
  m.configure(Problem{cols, 3, bytes.layout()});
  Owned base(m.parameters(), 2), from_bytes(base), from_floats(base);
  std::vector<std::uint32_t> batch(rows);
  for (std::uint32_t i = 0; i < rows; ++i) batch[i] = (i * 7) % rows;  // shuffled
  Batch bb{&bytes, labels.data(), batch.data(), rows}, bf{&dense, labels.data(), batch.data(), rows};
  CHECK(m.step<Update<HogwildUpdate, Sgd>>(bb, from_bytes.set, 0.5f) ==
        doctest::Approx(m.step<Update<HogwildUpdate, Sgd>>(bf, from_floats.set, 0.5f)));
  int moved = 0;
  for (std::size_t t = 0; t < base.store.size(); ++t)
    for (std::size_t i = 0; i < base.store[t].size(); ++i) {
      CHECK(from_bytes.store[t][i] == from_floats.store[t][i]);
      moved += from_bytes.store[t][i] != base.store[t][i];
    }
  CHECK(moved > 500);
}

TEST_CASE("mlp bf16: serial and two Hogwild! workers train like fp32" * doctest::test_suite("bf16")) {
  if (!bf16_runs()) {
    test::skip(kernels::bf16::unavailable_reason() + "; " + kernels::bf16_unsupported_reason());
    return;
  }
  auto [train_set, test_set] = problem();
  TrainConfig c;
  c.model = "mlp";
  c.model_options.hidden = {64};
  c.epochs = 10;
  c.batch = 16;
  c.step_size.lr0 = 0.1f;
  c.step_size.decay = 0.8f;
  c.mode = Mode::serial;
  const auto fp = train(c, train_set, &test_set);
  c.model_options.matmul = MatmulPrecision::bf16;
  const auto serial = train(c, train_set, &test_set);
  c.mode = Mode::hogwild;
  c.workers = 2;
  const auto hogwild = train(c, train_set, &test_set);
  MESSAGE("fp32 serial " << fp.test.accuracy << "; bf16 serial " << serial.test.accuracy
                         << ", hogwild x2 " << hogwild.test.accuracy);
  CHECK(serial.test.accuracy > fp.test.accuracy - 0.02);
  CHECK(hogwild.test.accuracy > fp.test.accuracy - 0.03);
}

TEST_CASE("hogwild_train --matmul-precision: bad values, other models and no bf16 unit exit 2") {
  test::TempDir dir;
  auto [tr, te] = test::generated_problem(200, 50, 30, 5, 0.0, 3);
  write_libsvm(tr, dir.file("train.svm"));
  const std::string train_path = dir.file("train.svm");
  const auto expect = [&](std::vector<std::string> argv, const std::string& message) {
    const auto r = test::run(argv);
    INFO(r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find(message) != std::string::npos);
  };
  expect({test::hogwild_train_path(), "--train", train_path, "--model", "mlp",
          "--matmul-precision", "fp16"},
         "unknown --matmul-precision \"fp16\"; expected fp32 or bf16");
  expect({test::hogwild_train_path(), "--train", train_path, "--model", "logistic",
          "--matmul-precision", "bf16"},
         "--matmul-precision bf16 applies to --model mlp only");
  expect({"/usr/bin/env", "HOGWILD_DISABLE_AMX=1", "HOGWILD_DISABLE_AVX512BF16=1",
          test::hogwild_train_path(), "--train", train_path, "--model", "mlp",
          "--matmul-precision", "bf16"},
         "--matmul-precision bf16 cannot run here: the AMX tile unit is disabled by "
         "HOGWILD_DISABLE_AMX; AVX512-BF16 is disabled by HOGWILD_DISABLE_AVX512BF16; use fp32");
  if (bf16_runs()) {
    const auto ok = test::run({test::hogwild_train_path(), "--train", train_path, "--model",
                               "mlp", "--hidden", "8", "--epochs", "1", "--matmul-precision",
                               "bf16", "--summary", dir.file("s.json"), "-q"});
    CHECK_MESSAGE(ok.exit_code == 0, ok.out);
    std::ifstream in(dir.file("s.json"));
    const std::string summary((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(summary.find("\"matmul_precision\": \"bf16\"") != std::string::npos);
  }
  // Without the tile unit, AVX512-BF16 runs the products where the CPU has it.
  if (kernels::bf16_supported()) {
    const auto ok = test::run({"/usr/bin/env", "HOGWILD_DISABLE_AMX=1", test::hogwild_train_path(),
                               "--train", train_path, "--model", "mlp", "--hidden", "8",
                               "--epochs", "1", "--matmul-precision", "bf16", "-q"});
    CHECK_MESSAGE(ok.exit_code == 0, ok.out);
  }
}
