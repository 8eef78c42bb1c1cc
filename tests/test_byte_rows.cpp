// Byte rows (Layout::dense_u8, value = byte / 255) in the models and the trainer:
// softmax and the MLP read them as they are and must learn what they learn from the
// same rows as floats; every other model gets the set widened by train(), and
// refuses byte rows handed to it directly.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/models/softmax.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
#include "owned_params.hpp"

using namespace hogwild;

namespace {

// Images of `classes` kinds: each class brightens its own third of the pixels. 37
// pixels, so that every kernel's vector loop and scalar tail run.
Dataset images(std::size_t rows, std::size_t classes, std::uint64_t seed,
               std::size_t pixels = 37) {
  Rng rng(seed);
  std::vector<float> labels(rows);
  std::vector<std::uint8_t> bytes(rows * pixels);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t y = rng.next() % classes;
    labels[r] = static_cast<float>(y);
    for (std::size_t j = 0; j < pixels; ++j) {
      const bool lit = j * classes / pixels == y;
      bytes[r * pixels + j] = static_cast<std::uint8_t>((rng.next() & 127) + (lit ? 128 : 0));
    }
  }
  return Dataset::dense_u8(labels, bytes, pixels, "images(seed=" + std::to_string(seed) + ")");
}

TrainConfig config(const std::string& model, Mode mode, unsigned workers) {
  TrainConfig c;
  c.model = model;
  c.mode = mode;
  c.workers = workers;
  c.epochs = 3;
  c.batch = 8;
  c.step_size.lr0 = 0.1f;
  c.seed = 3;
  if (model == "mlp") c.model_options.hidden = {16};
  return c;
}

}  // namespace

TEST_CASE("softmax steps on byte rows as on the same rows as floats, in every mode") {
  const Dataset bytes = images(40, 3, 1), floats = bytes.widened();
  REQUIRE(bytes.layout() == Layout::dense_u8);
  REQUIRE(floats.layout() == Layout::dense);
  SoftmaxModel m({});
  CHECK(m.reads_byte_rows());
  auto labels = LabelMap::fit(m.label_kind(), bytes, "softmax");
  m.configure(Problem{bytes.cols(), labels.classes(), bytes.layout()});
  const auto t = labels.targets(bytes);
  const test::OwnedParams base(m.parameters(), 5);
  std::vector<std::uint32_t> rows{0, 3, 5, 8, 13, 21, 34};
  const Batch on_bytes{&bytes, t.data(), rows.data(), rows.size()};
  const Batch on_floats{&floats, t.data(), rows.data(), rows.size()};
  auto compare = [&]<class U>() {
    test::OwnedParams a(base), b(base);
    const double la = m.step<U>(on_bytes, a.set, 0.5f);
    const double lb = m.step<U>(on_floats, b.set, 0.5f);
    CHECK(la == doctest::Approx(lb).epsilon(1e-5));
    for (std::size_t k = 0; k < a.store.size(); ++k)
      for (std::size_t i = 0; i < a.store[k].size(); ++i)
        CHECK(a.store[k][i] == doctest::Approx(b.store[k][i]).epsilon(1e-5).scale(1e-5));
  };
  compare.operator()<Update<SerialUpdate, Sgd>>();
  compare.operator()<Update<HogwildUpdate, Sgd>>();
  compare.operator()<Update<AtomicUpdate, Sgd>>();
  compare.operator()<Update<HogwildUpdate, AdaGrad>>();
  // Evaluation reads byte rows too.
  const Evaluation eb = m.evaluate(base.set, bytes, t.data());
  const Evaluation ef = m.evaluate(base.set, floats, t.data());
  CHECK(eb.loss == doctest::Approx(ef.loss).epsilon(1e-5));
  CHECK(eb.accuracy == ef.accuracy);
}

TEST_CASE("training softmax and the MLP on byte rows learns what floats learn") {
  const Dataset train = images(600, 3, 2), test = images(200, 3, 3);
  const Dataset train_f = train.widened(), test_f = test.widened();
  for (const char* model : {"softmax", "mlp"}) {
    CAPTURE(model);
    const TrainResult b = hogwild::train(config(model, Mode::serial, 1), train, &test);
    const TrainResult f = hogwild::train(config(model, Mode::serial, 1), train_f, &test_f);
    CHECK(b.test.accuracy > 0.9);  // the classes are separable
    CHECK(b.test.loss == doctest::Approx(f.test.loss).epsilon(1e-3));
    CHECK(std::fabs(b.test.accuracy - f.test.accuracy) <= 0.01);
    const TrainResult h = hogwild::train(config(model, Mode::hogwild, 2), train, &test);
    CHECK(h.samples == 3 * train.rows());
    CHECK(h.test.accuracy > 0.9);
  }
}

TEST_CASE("a model that reads floats gets byte sets widened by train() and refuses them directly") {
  const Dataset bytes = images(300, 2, 4), test = images(100, 2, 5);
  TrainConfig c = config("logistic", Mode::serial, 1);
  const TrainResult b = hogwild::train(c, bytes, &test);
  const Dataset bytes_f = bytes.widened(), test_f = test.widened();
  const TrainResult f = hogwild::train(c, bytes_f, &test_f);
  // The same floats in the same order: the same weights, bit for bit.
  CHECK(b.parameters == f.parameters);
  CHECK(b.test.loss == f.test.loss);
  CHECK(b.test.accuracy > 0.9);
  c.mode = Mode::hogwild;
  c.workers = 2;
  CHECK(hogwild::train(c, bytes, &test).test.accuracy > 0.9);

  LinearModel m(LinearLoss::logistic, {});
  CHECK_FALSE(m.reads_byte_rows());
  auto labels = LabelMap::fit(m.label_kind(), bytes, "logistic");
  m.configure(Problem{bytes.cols(), labels.classes(), bytes.layout()});
  const auto t = labels.targets(bytes);
  const test::OwnedParams p(m.parameters(), 1);
  CHECK_THROWS_AS(m.evaluate(p.set, bytes, t.data()), ConfigError);
  CHECK_NOTHROW(m.evaluate(p.set, bytes_f, t.data()));
}
