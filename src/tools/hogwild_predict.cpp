// hogwild_predict: predictions of a model that hogwild_train --save-model wrote.
//   hogwild_predict --model spam.safetensors --data test.svm            labels, one a line
//   hogwild_predict --model digits.safetensors --data t10k-images-idx3-ubyte.gz --probabilities
//   hogwild_predict --model digits.safetensors --data test.svm --top 3 --output top3.txt
//   hogwild_predict --model ml.safetensors --data ratings.test.tsv      predicted ratings
// Lines are liblinear's and fastText's: the label; with --probabilities a first line
// "labels L1 L2 ..." and then the label and each class's probability; with --top K
// the K likeliest labels, each followed by its probability. Labelled rows also give
// the accuracy, log loss and AUC (binary), or RMSE and MAE, on standard error when
// the predictions go to standard output (--summary FILE: as JSON).
// Exit status: 0 ok, 2 bad input or option (a file that is not a model, a model
// this program does not have), 4 out of memory or disk, 1 otherwise.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "data/file_io.hpp"
#include "hogwild/config.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/predictor.hpp"

#include "file_roles.hpp"

namespace {

using namespace hogwild;

struct Options {
  std::string model, data, labels, output = "-", summary;
  bool probabilities = false, quiet = false;
  unsigned top = 0;
};

// JSON numbers for the metrics; null where one does not apply (NaN).
nlohmann::json number(double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); }

std::string describe(const PredictionMetrics& m) {
  std::string s;
  auto add = [&](const char* name, double x) {
    if (!std::isnan(x)) s += fmt::format("{}{} {:.4f}", s.empty() ? "" : ", ", name, x);
  };
  add("accuracy", m.accuracy);
  add("log loss", m.log_loss);
  add("AUC", m.auc);
  add("RMSE", m.rmse);
  add("MAE", m.mae);
  return s + fmt::format(" ({} rows)", m.rows);
}

void write_predictions(const Predictor& p, const Options& o, std::span<const float> labels,
                       std::span<const float> out) {
  detail::TextWriter w(o.output);
  const std::size_t k = p.outputs();
  const LabelMap& map = p.description().labels;
  if (o.probabilities) {
    w.put('l').put('a').put('b').put('e').put('l').put('s');
    for (std::size_t c = 0; c < k; ++c) w.put(' ').number(map.label_of(c));
    w.end_line();
  }
  std::vector<std::size_t> order(k);
  for (std::size_t r = 0; r < labels.size(); ++r) {
    const float* row = out.data() + r * k;
    if (o.top > 0) {
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::partial_sort(order.begin(), order.begin() + o.top, order.end(),
                        [&](auto a, auto b) { return row[a] > row[b]; });
      for (unsigned i = 0; i < o.top; ++i) {
        if (i) w.put(' ');
        w.number(map.label_of(order[i])).put(' ').number(row[order[i]]);
      }
    } else {
      w.number(labels[r]);
      if (o.probabilities)
        for (std::size_t c = 0; c < k; ++c) w.put(' ').number(row[c]);
    }
    w.end_line();
  }
  w.commit();
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"Predict with a model that hogwild_train --save-model wrote", "hogwild_predict"};
  app.set_version_flag("--version", std::string("hogwild_predict ") + HOGWILD_VERSION);
  app.add_option("--model", o.model, "The model file (safetensors, from --save-model)")
      ->required();
  app.add_option("--data", o.data, "Rows to predict: libsvm text, IDX images, rating triples or "
                                   "a cache (- for standard input)")
      ->required();
  app.add_option("--labels", o.labels, "IDX: the labels file (default: beside the images)");
  app.add_option("--output", o.output, "Where the predictions go (- , the default: standard output)");
  app.add_flag("--probabilities", o.probabilities,
               "Each class's probability after the label (logistic, softmax, mlp)");
  app.add_option("--top", o.top, "The K likeliest labels with their probabilities")
      ->check(CLI::Range(1u, 1000u));
  app.add_option("--summary", o.summary, "Write the metrics as JSON to FILE (- for standard output)");
  app.add_flag("-q,--quiet", o.quiet, "No metrics line");
  app.footer(
      "Exit status: 0 ok, 2 bad input or option, 4 out of memory or disk, 1 otherwise.\n"
      "Example: hogwild_predict --model spam.safetensors --data spam.test.svm --probabilities");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "hogwild_predict: error: {}\n", e.what());
    return kExitBadInput;
  }
  if (o.model == "-" && (o.data == "-" || o.labels == "-"))
    throw ConfigError(fmt::format("--model - and --{} - both read standard input: give one of them "
                                  "a file", o.data == "-" ? "data" : "labels"));
  if (o.probabilities && o.top > 0)
    throw ConfigError("--probabilities and --top: lines hold one or the other; choose one");
  if (detail::is_stdout(o.output) && detail::is_stdout(o.summary))
    throw ConfigError("--output and --summary both go to standard output: give one a file");
  auto inputs = tools::labels_beside("--labels (found beside --data)", o.data, o.labels);
  inputs.insert(inputs.end(), {{"--model", o.model}, {"--data", o.data}, {"--labels", o.labels}});
  tools::check_outputs(inputs, {{"--output", o.output}, {"--summary", o.summary}});

  const Predictor p = load_model(o.model);
  if ((o.probabilities || o.top > 0) && !p.probabilities())
    throw ConfigError(fmt::format("--{}: model {} gives {}, not class probabilities",
                                  o.top > 0 ? "top" : "probabilities", p.description().model,
                                  p.description().output == "score" ? "a score" : "a value"));
  if (o.top > p.outputs())
    throw ConfigError(fmt::format("--top {}: model {} has {} classes", o.top,
                                  p.description().model, p.outputs()));
  if (p.outputs() == 0)
    throw ConfigError(fmt::format("model {} does not predict rows (its class defines no outputs())",
                                  p.description().model));
  const auto t0 = std::chrono::steady_clock::now();
  const Dataset given = load_dataset(o.data, o.labels);
  const Dataset data = p.prepare(given);
  if (data.rows() == 0)
    throw ConfigError(fmt::format("--data {} has no rows: nothing to predict", o.data));
  // Sparse rows' features past the model's are dropped: said, since where most are,
  // the rows are likely not the kind it was trained on (another feature numbering).
  const std::size_t dropped =
      data.layout() == Layout::sparse && given.layout() == Layout::sparse ? given.nnz() - data.nnz() : 0;
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<float> labels(data.rows()), out(data.rows() * p.outputs());
  p.predict(data, labels, out);
  const auto t2 = std::chrono::steady_clock::now();
  // A reader gone (| head): the metrics and the summary all the same, then 141.
  std::string reader_gone;
  try {
    write_predictions(p, o, labels, out);
  } catch (const PipeError& e) {
    reader_gone = e.what();
  }

  // The metrics, where every label is one the training data had (on stderr when
  // the predictions or the summary take standard output).
  std::FILE* human = detail::is_stdout(o.output) || detail::is_stdout(o.summary) ? stderr : stdout;
  std::optional<PredictionMetrics> m;
  std::string why_not;
  try {
    m = p.evaluate(data);
  } catch (const DataError& e) {
    why_not = e.what();
  }
  const double load_s = std::chrono::duration<double>(t1 - t0).count();
  const double predict_s = std::chrono::duration<double>(t2 - t1).count();
  if (dropped)
    fmt::print(stderr, "hogwild_predict: {}{} of the rows' {} non-zeros ({:.1f}%) are of features past "
               "the model's {}, which it never saw: dropped{}\n",
               2 * dropped > given.nnz() ? "warning: " : "", dropped, given.nnz(),
               100.0 * static_cast<double>(dropped) / static_cast<double>(given.nnz()),
               p.description().problem.features,
               2 * dropped > given.nnz() ? " (are these the features it was trained on?)" : "");
  if (!o.quiet) {
    if (m)
      fmt::print(human, "{}: {}\n", detail::stream_name(o.data), describe(*m));
    else
      fmt::print(human, "no metrics: {}\n", why_not);
    fmt::print(human, "predicted {} rows in {:.3f} s ({:.0f} rows/s; loaded in {:.3f} s)\n",
               data.rows(), predict_s, predict_s > 0 ? static_cast<double>(data.rows()) / predict_s : 0.0,
               load_s);
  }
  if (!o.summary.empty()) {
    nlohmann::json j{{"model", o.model},
                     {"model_name", p.description().model},
                     {"data", o.data},
                     {"rows", data.rows()},
                     {"dropped_nonzeros", dropped},  // of features past the model's
                     {"load_seconds", load_s},  // reading, checking and preparing the rows
                     {"predict_seconds", predict_s},
                     {"rows_per_second", predict_s > 0 ? static_cast<double>(data.rows()) / predict_s : 0.0}};
    if (m) {
      j["accuracy"] = number(m->accuracy);
      j["log_loss"] = number(m->log_loss);
      j["auc"] = number(m->auc);
      j["rmse"] = number(m->rmse);
      j["mae"] = number(m->mae);
    } else {
      j["no_metrics"] = why_not;
    }
    detail::OutputFile f(o.summary, false);
    f.write(hogwild::detail::json_text(j, 2) + "\n");
    f.commit();
  }
  if (!reader_gone.empty()) {
    fmt::print(stderr, "hogwild_predict: the reader of the predictions is gone before all {} were "
               "written ({}){}\n", data.rows(), reader_gone,
               o.summary.empty() ? "" : "; the summary is written");
    return kExitPipe;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  hogwild::tools::reopen_closed_standard_streams();  // (before any descriptor is opened)
  signal(SIGXFSZ, SIG_IGN);
  tools::remove_temporaries_on_stop();
  // A closed standard output is a write error (PipeError, EPIPE), not a silent death:
  // the summary is still written, and the exit says why (141).
  signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "hogwild_predict: error: {}\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "hogwild_predict: error: out of memory\n");
    return kExitResource;
  } catch (const std::exception& e) {
    fmt::print(stderr, "hogwild_predict: error: {}\n", e.what());
    return kExitFailure;
  }
}
