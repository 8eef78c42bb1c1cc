// hogwild_data: make, convert and inspect datasets for hogwild_train.
//   hogwild_data generate --rows 100000 --features 50000 --nnz-per-row 40 --out syn.svm.gz
//   hogwild_data generate --kind ratings --users 5000 --items 2000 --rank 10
//                         --ratings 1000000 --noise 0.5 --out r.tsv --test-out r.test.tsv
//   hogwild_data convert spam.train.svm.gz --out spam.train.cache
//   hogwild_data info train-images-idx3-ubyte.gz
//   hogwild_data stats --train spam.train.svm.gz --model logistic [--json stats.json]
// Exit status: 0 ok, 2 bad input or option, 4 out of memory or disk, 1 otherwise.
#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>

#include "hogwild/config.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include <fmt/ranges.h>

#include "data/file_io.hpp"
#include "hogwild/checkpoint.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/model_file.hpp"
#include "hogwild/sparsity.hpp"

#include "file_roles.hpp"
#include "options.hpp"

namespace {

using namespace hogwild;

// A count that must be at least 1 (CLI11's PositiveNumber said "not in range
// 0.000000 to 1797693134862315708145274237317043567980...").
const CLI::Validator kAtLeastOne(
    [](std::string& s) -> std::string {
      std::uint64_t n = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
      if (ec == std::errc() && end == s.data() + s.size() && n >= 1) return {};
      return "expected a whole number of at least 1, got " + s;
    },
    "N >= 1");

bool ends_with_any(const std::string& s, std::initializer_list<const char*> suffixes) {
  for (const char* suf : suffixes)
    if (s.ends_with(suf)) return true;
  return false;
}

// "cache" or "libsvm" (text: rating triples for a ratings dataset): what a file
// named `out` should hold unless told otherwise.
std::string format_for(const std::string& out, const std::string& asked) {
  if (!asked.empty()) return asked;
  return ends_with_any(out, {".cache", ".hwd"}) ? "cache" : "libsvm";
}

void save(const Dataset& d, const std::string& out, const std::string& format) {
  const bool ratings = d.layout() == Layout::ratings;
  if (format == "cache")
    write_cache(d, out);
  else if (ratings)
    write_ratings(d, out);
  else
    write_libsvm(d, out);
  // (Data on standard output: the line goes to stderr, out of the data's way.)
  std::fflush(stdout);
  fmt::print(detail::is_stdout(out) ? stderr : stdout, "wrote {}: {} rows, {} features, {} non-zeros ({})\n",
             out, d.rows(), d.cols(),
             hogwild::nonzeros(d),
             format == "cache" ? fmt::format("binary cache, {}", to_string(d.layout()))
             : ratings         ? (out.ends_with(".gz") ? "ratings, gzip" : "ratings")
             : out.ends_with(".gz") ? "libsvm, gzip"
                                    : "libsvm");
}

// Rows [begin, end) of a sparse set, as a set of their own.
Dataset rows_of(const Dataset& d, std::size_t begin, std::size_t end) {
  const auto offsets = d.offsets().subspan(begin, end - begin + 1);
  std::vector<std::uint64_t> shifted(offsets.begin(), offsets.end());
  for (auto& o : shifted) o -= offsets[0];
  return Dataset::sparse(d.labels().subspan(begin, end - begin), shifted,
                         d.indices().subspan(offsets[0], shifted.back()),
                         d.values().subspan(offsets[0], shifted.back()), d.cols(), d.source());
}

const char* format_name(FileFormat f) {
  switch (f) {
    case FileFormat::libsvm: return "libsvm text";
    case FileFormat::idx: return "IDX";
    case FileFormat::cache: return "binary cache";
    case FileFormat::ratings: return "rating triples";
  }
  return "?";
}

// A model file (--save-model): its model, what it predicts, its tensors and options.
void model_info(const std::string& path, const std::string& shown) {
  const ModelFileHeader h = read_model_header(path);
  const ModelDescription d = describe_model(h, path);
  auto said = [&](const char* key) {
    const auto it = h.metadata.find(key);
    return it == h.metadata.end() ? std::string("?") : it->second;
  };
  fmt::print("file:       {} (hogwild model, safetensors, format {})\n", shown,
             said("format_version"));
  fmt::print("model:      {} (hogwild {})\n", d.model, said("hogwild_version"));
  std::string options;
  for (const auto& [k, v] : d.options) options += fmt::format("{}--{} {}", options.empty() ? "" : " ", k, v);
  fmt::print("options:    {}\n", options);
  fmt::print("features:   {} ({} rows)\n", d.problem.features, to_string(d.problem.layout));
  if (d.problem.layout == Layout::ratings)
    fmt::print("users:      {}, items {}, mean rating {}\n", d.problem.users, d.problem.items,
               d.problem.target_mean);
  std::string labels;
  for (std::size_t k = 0; k < d.labels.values().size(); ++k)
    labels += fmt::format("{}{}", k ? " " : "", d.labels.label_of(k));
  fmt::print("labels:     {}{}\n", said("labels"), labels.empty() ? "" : " (" + labels + ")");
  fmt::print("predicts:   {} {} a row\n", d.outputs, d.output);
  fmt::print("trained:    {} epoch(s) on {}\n", d.epochs, d.data.describe());
  std::uint64_t values = 0;
  for (const auto& t : h.tensors) {
    std::uint64_t n = (t.end - t.begin) / (t.dtype == "F16" ? 2 : 4);
    values += n;
    fmt::print("tensor:     {} {} [{}] ({} values)\n", t.name, t.dtype, fmt::join(t.shape, ", "), n);
  }
  fmt::print("size:       {} bytes ({} values, header {} bytes)\n", h.file_bytes, values,
             h.data_offset);
}

// A checkpoint (--checkpoint): its options, progress, data and tensors.
void checkpoint_info(const Checkpoint& c, const std::string& path) {
  fmt::print("file:       {} (hogwild checkpoint)\n", path);
  std::string options;
  for (const auto& [k, v] : c.config) options += fmt::format("{}{} {}", options.empty() ? "" : " ", k, v);
  fmt::print("options:    {}\n", options);
  fmt::print("progress:   {} epoch(s) done by every worker; {} worker(s), {} restart(s), {:.3f} s trained\n",
             c.epochs_done(), c.workers.size(), c.restarts, c.train_seconds);
  fmt::print("data:       {}\n", c.data.describe());
  for (const auto& t : c.tensors) fmt::print("tensor:     {} ({} values)\n", t.name, t.values.size());
}

void info(const std::string& path, const std::string& labels, unsigned threads) {
  // A pipe is read once, by the loader: sniffing it first would eat its head.
  std::error_code ec;
  const bool stream = path == "-" || (std::filesystem::exists(path, ec) &&
                                      !std::filesystem::is_regular_file(path, ec));
  // As the file holds it (the infinite density keeps sparse text sparse).
  const LoadOptions as_held{threads, Storage::automatic, std::numeric_limits<double>::infinity()};
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<Dataset> read;
  if (stream) {  // read once: a model, a checkpoint or data
    const std::string bytes = detail::read_stream(path, detail::stream_name(path));
    if (looks_like_model_file(bytes)) {
      const int fd = detail::memory_file(bytes, "the model");
      model_info(fmt::format("/proc/self/fd/{}", fd), detail::stream_name(path));
      ::close(fd);
      return;
    }
    if (bytes.starts_with("HWCKPT01"))
      return checkpoint_info(parse_checkpoint(bytes, detail::stream_name(path)),
                             detail::stream_name(path));
    read = detail::parse_stream(bytes, path, labels, as_held);
  } else {
    const std::string head = detail::read_head(path, 16);
    if (looks_like_model_file(head)) return model_info(path, path);
    if (head.starts_with("HWCKPT01")) return checkpoint_info(read_checkpoint(path), path);
  }
  const std::string format = stream ? "read from a stream" : format_name(detect_format(path));
  Dataset d = read ? std::move(*read) : load_dataset(path, labels, as_held);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DatasetStats st = describe(d);
  const double cells = static_cast<double>(st.rows) * static_cast<double>(st.cols);
  fmt::print("file:       {} ({}, {})\n", path, format, to_string(d.layout()));
  fmt::print("rows:       {}\n", st.rows);
  if (d.layout() == Layout::ratings) {  // ids as in the file: 1 + the largest id
    fmt::print("users:      {} (1 + largest user id)\n", d.users());
    fmt::print("items:      {} (1 + largest item id)\n", st.cols);
  } else {
    fmt::print("features:   {}\n", st.cols);
  }
  fmt::print("non-zeros:  {} ({:.2f} per row)\n", st.nnz,
             st.rows ? static_cast<double>(st.nnz) / static_cast<double>(st.rows) : 0.0);
  fmt::print("density:    {:.6g}\n", cells > 0 ? static_cast<double>(st.nnz) / cells : 0.0);
  fmt::print("memory:     {:.1f} MiB shared by all workers\n",
             static_cast<double>(d.bytes()) / (1 << 20));
  fmt::print("labels:     {} distinct{}\n", st.label_counts.size(),
             st.many_labels ? " (more than 1000; counted the first 1000)" : "");
  for (auto [label, count] : st.label_counts)
    fmt::print("  {:>8}: {} ({:.1f}%)\n", label, count,
               100.0 * static_cast<double>(count) / static_cast<double>(st.rows));
  fmt::print("loaded in:  {:.3f} s\n", secs);
}

struct StatsCommand {
  std::string train, labels, rho = "auto", json, tau = "1,2,4,8,16";
  unsigned threads = 0;
  bool no_bias = false;
  SparsityOptions options;
};

std::vector<double> parse_taus(const std::string& text) {
  std::vector<double> taus;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    std::size_t used = 0;
    double tau = -1;
    try {
      tau = std::stod(item, &used);
    } catch (const std::exception&) {
    }
    if (item.empty() || used != item.size() || !(tau >= 0) || !std::isfinite(tau))
      throw ConfigError("--tau expects comma-separated staleness values >= 0 such as 1,2,4, got \"" +
                        text + "\"");
    taus.push_back(tau);
    begin = end + 1;
  }
  return taus;
}


void stats(StatsCommand& c) {
  SparsityOptions& o = c.options;
  o.bias = !c.no_bias;
  o.rho = c.rho == "exact" ? SparsityOptions::Rho::exact
        : c.rho == "bounds" ? SparsityOptions::Rho::bounds
                            : SparsityOptions::Rho::automatic;
  const auto taus = parse_taus(c.tau);
  const Dataset d = load_dataset(c.train, c.labels,
                                 {c.threads, Storage::automatic, std::numeric_limits<double>::infinity()});
  const SparsityStats s = sparsity_stats(d, o);
  // With --json -, standard output carries the JSON alone.
  std::FILE* human = c.json == "-" ? stderr : stdout;
  const bool mf = o.model == "mf";
  const char* node = mf ? "user or item" : "feature";
  fmt::print(human, "data:      {} for --model {}: m = {} updates ({}){}, {} coordinates written\n",
             c.train, o.model, s.updates, mf ? "ratings" : "rows",
             s.empty ? fmt::format(" ({} empty rows left out)", s.empty) : "", s.coordinates);
  fmt::print(human, "Omega:     {} coordinates in the largest update (mean {:.1f})\n", s.omega, s.mean_size);
  fmt::print(human, "Delta:     {:.4g} ({} is in {:.1f}% of the updates)\n", s.delta, s.busiest,
             100 * s.delta);
  if (s.rho)
    fmt::print(human, "rho:       {:.4g}  {} ({:.2f} s)\n", *s.rho, s.rho_how, s.rho_seconds);
  else
    fmt::print(human, "rho:       between {:.4g} and {:.4g}; {}\n", s.rho_lower, s.rho_upper, s.rho_how);
  if (s.p_conf_exact)
    fmt::print(human, "conflicts: P(two updates share a coordinate) = {:.4g}, average conflict degree "
               "{:.4g} (exact)\n", s.p_conf, s.conflict_degree);
  else
    fmt::print(human, "conflicts: P(two updates share a coordinate) = {:.4g} +- {:.2g} ({} sampled pairs); "
               "average conflict degree {:.4g} (at most {:.4g})\n",
               s.p_conf, s.p_conf_se, s.pairs, s.conflict_degree, s.conflict_degree_upper);
  fmt::print(human, "kappa:     {:.4g} coordinates shared by two random updates, on average\n", s.kappa);
  fmt::print(human, "degrees:   power law alpha = {:.3g} (degree >= {}, {} {}s); Zipf rank slope {:.3g} "
             "(ranks 10-1000)\n", s.alpha, s.alpha_min, s.alpha_nodes, node, s.zipf_slope);
  fmt::print(human, "hot:       {:>16}  {:>10}  {:>10}  {:>12}\n", "coordinate", "updates", "of all",
             "of writes");
  for (const auto& h : s.hot)
    fmt::print(human, "           {:>16}  {:>10}  {:>9.2f}%  {:>11.2f}%\n", h.what, h.degree,
               100 * h.fraction, 100 * h.write_share);
  if (s.bias_coordinates)
    fmt::print(human, "bias:      the model writes {} bias coordinate(s) in every update: as trained, "
               "Omega = {}, Delta = rho = 1 (--no-bias for the figures without it)\n",
               s.bias_coordinates, s.omega + s.bias_coordinates);
  std::vector<TheoryView> theory;
  for (double tau : taus) theory.push_back(theory_at(s, tau, o.bias));
  fmt::print(human, "theory{}:  {:>6}  {:>12}  {:>10}  {}\n", s.rho ? "" : " (rho's upper bound)", "tau",
             "Hogwild! H", "", "Mania et al.: tau <= m / conflict degree");
  for (const auto& v : theory)
    fmt::print(human, "           {:>6g}  {:>12.4g}  {:>10}  {:.4g}{}\n", v.tau, v.hogwild_overhead,
               v.hogwild_vacuous ? "vacuous" : "", v.mania_limit,
               v.mania_vacuous ? "  vacuous" : "");
  if (!c.json.empty()) {
    const std::string text = sparsity_json(s, theory, c.train, 1) + "\n";
    std::fflush(human);
    write_file_atomically(c.json, text);  // the one writer: - and links too
    if (c.json != "-") fmt::print(human, "wrote {}\n", c.json);
  }
}

}  // namespace

int main(int argc, char** argv) {
  hogwild::tools::reopen_closed_standard_streams();  // (before any descriptor is opened)
  CLI::App app{"Generate, convert and inspect datasets for hogwild_train.", "hogwild_data"};
  app.set_version_flag("--version", std::string("hogwild_data ") + HOGWILD_VERSION);
  app.require_subcommand(1);
  tools::remove_temporaries_on_stop();

  GenerateOptions gen;
  RatingsGenerateOptions rgen;
  std::string gen_out, gen_format, gen_kind = "sparse", gen_test_out;
  double gen_noise = gen.noise, gen_zipf = -1;
  auto* g = app.add_subcommand("generate",
                               "Synthetic sparse binary classification (Zipf feature popularity), "
                               "or low-rank ratings (--kind ratings)");
  g->add_option("--kind", gen_kind, "sparse (libsvm classification) or ratings (user item rating)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sparse", "ratings"}));
  g->add_option("--rows", gen.rows, "Number of rows")
      ->capture_default_str()
      ->check(kAtLeastOne);
  g->add_option("--features", gen.features, "Number of features (columns)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{4294967295}));
  g->add_option("--nnz-per-row", gen.nnz_per_row, "Non-zeros in each row (at most --features)")
      ->capture_default_str()
      ->check(kAtLeastOne);
  g->add_option("--noise", gen_noise,
                "sparse: fraction of labels flipped (0 to 0.5); ratings: sd of the Gaussian "
                "noise on each rating (default 0.1)")
      ->check(CLI::Range(0.0, 100.0));
  g->add_option("--zipf", gen_zipf,
                "Exponent of feature (sparse, default 1) or user and item (ratings, default "
                "0.5) popularity; 0 = uniform")
      ->check(CLI::Range(0.0, 10.0));
  g->add_option("--seed", gen.seed, "Random seed (same seed, same data)")->capture_default_str();
  g->add_option("--users", rgen.users, "ratings: number of users (ids 1..U)")
      ->capture_default_str()->check(CLI::Range(std::size_t{1}, std::size_t{kMaxRatingId}));
  g->add_option("--items", rgen.items, "ratings: number of items (ids 1..I)")
      ->capture_default_str()->check(CLI::Range(std::size_t{1}, std::size_t{kMaxRatingId}));
  g->add_option("--rank", rgen.rank, "ratings: rank of the hidden factors")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  g->add_option("--ratings", rgen.ratings, "ratings: number of training ratings")
      ->capture_default_str()->check(kAtLeastOne);
  g->add_option("--test-out", gen_test_out,
                "Also write test rows (ratings) drawn from the same hidden model to FILE");
  std::size_t gen_test_rows = 0;
  g->add_option("--test-rows", gen_test_rows,
                "sparse: number of test rows (default: a tenth of --rows)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 40));
  g->add_option("--test-ratings", rgen.test_ratings,
                "ratings: number of test ratings (default: a tenth of --ratings)");
  g->add_option("--out", gen_out,
                "Output file: .cache/.hwd = binary cache, .gz = gzip'ed libsvm, else libsvm text")
      ->required();
  g->add_option("--format", gen_format, "Force the output format")
      ->check(CLI::IsMember({"libsvm", "cache"}));

  std::string conv_in, conv_labels, conv_out, conv_format, conv_storage = "auto";
  unsigned conv_threads = 0;
  auto* c = app.add_subcommand("convert", "Convert libsvm text or IDX images to the binary cache");
  c->add_option("input", conv_in, "libsvm (.gz too), IDX images or a cache")->required();
  c->add_option("--labels", conv_labels,
                "IDX labels file (default: guessed from the images file name)");
  c->add_option("--out", conv_out, "Output file")->required();
  c->add_option("--format", conv_format, "Output format (default: cache)")
      ->check(CLI::IsMember({"libsvm", "cache"}));
  c->add_option("--threads", conv_threads, "Parser threads (0 = all cores)")
      ->capture_default_str()->check(hogwild::tools::parser_threads());
  c->add_option("--storage", conv_storage,
                "Rows in the cache: sparse, dense (bytes when every value is k/255), or auto "
                "(dense from the density where the dense kernels win, as hogwild_train loads)")
      ->capture_default_str();

  std::string info_in, info_labels;
  unsigned info_threads = 0;
  auto* i = app.add_subcommand(
      "info", "Print rows, features, non-zeros, density and label counts; a model file's or "
              "checkpoint's model, options, data and tensors");
  i->add_option("file", info_in, "libsvm (.gz too), IDX images or a cache")->required();
  i->add_option("--labels", info_labels,
                "IDX labels file (default: guessed from the images file name)");
  i->add_option("--threads", info_threads, "Parser threads (0 = all cores)")
      ->capture_default_str()->check(hogwild::tools::parser_threads());

  StatsCommand st;
  auto* sc = app.add_subcommand(
      "stats", "How parallelisable the data is for a model: the Hogwild! statistics Omega, Delta, "
               "rho, conflicts, hot coordinates, and the theories' view");
  sc->add_option("--train", st.train, "libsvm (.gz too), IDX images, ratings or a cache")->required();
  sc->add_option("--labels", st.labels, "IDX labels file (default: guessed from the images file name)");
  sc->add_option("--model", st.options.model, "logistic, hinge, squared, softmax or mf")
      ->capture_default_str()
      ->check(CLI::IsMember({"logistic", "hinge", "squared", "softmax", "mf", "mlp"}));
  sc->add_option("--classes", st.options.classes, "softmax: classes (default: the labels')");
  sc->add_option("--rank", st.options.rank, "mf: rank of the factors")->capture_default_str();
  sc->add_flag("--no-bias", st.no_bias, "The model has no bias coordinates");
  sc->add_option("--rho", st.rho,
                 "auto (exact where the sum of squared degrees is at most 2e10), exact, or bounds")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "exact", "bounds"}));
  sc->add_option("--pairs", st.options.pairs, "Random pairs of updates sampled for the conflicts")
      ->capture_default_str()
      ->check(kAtLeastOne);
  sc->add_option("--top", st.options.top, "Hot coordinates listed")->capture_default_str();
  sc->add_option("--tau", st.tau, "Staleness values for the theories' view")->capture_default_str();
  sc->add_option("--seed", st.options.seed, "Seed of the sampled pairs")->capture_default_str();
  sc->add_option("--json", st.json, "Also write the figures as JSON to FILE (- for stdout)");
  sc->add_option("--threads", st.threads, "Parser threads (0 = all cores)")
      ->capture_default_str()->check(hogwild::tools::parser_threads());

  hogwild::tools::refuse_negative_counts(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "hogwild_data: error: " << e.what() << " (see --help)\n";
    return kExitBadInput;
  }

  try {
    // No output may overwrite an input or another output, and each can be written,
    // before the work that makes it.
    if (*g) tools::check_outputs({}, {{"--out", gen_out}, {"--test-out", gen_test_out}});
    if (*g && detail::is_stdout(gen_out) && detail::is_stdout(gen_test_out))
      throw ConfigError("--out and --test-out would mix on standard output: give one of them a file");
    if (*c) {
      auto inputs = tools::labels_beside("--labels (found beside the input)", conv_in, conv_labels);
      inputs.insert(inputs.end(), {{"input", conv_in}, {"--labels", conv_labels}});
      tools::check_outputs(inputs, {{"--out", conv_out}});
    }
    if (*sc) {
      auto inputs = tools::labels_beside("--labels (found beside --train)", st.train, st.labels);
      inputs.insert(inputs.end(), {{"--train", st.train}, {"--labels", st.labels}});
      tools::check_outputs(inputs, {{"--json", st.json}});
    }
    if (*g && gen_test_out.empty() && (gen_test_rows > 0 || (g->count("--test-ratings") && rgen.test_ratings > 0)))
      throw ConfigError(fmt::format("--{}: give --test-out FILE for the test set",
                                    gen_test_rows > 0 ? "test-rows" : "test-ratings"));
    if (*g && g->count(gen_kind == "ratings" ? "--test-rows" : "--test-ratings"))
      throw ConfigError(gen_kind == "ratings"
                            ? "--test-rows is for --kind sparse; ratings take --test-ratings"
                            : "--test-ratings is for --kind ratings; sparse rows take --test-rows");
    // The other kind's sizes (--kind ratings --rows 10 wrote 100000 ratings).
    if (*g)
      for (const char* option : gen_kind == "ratings"
                                    ? std::vector<const char*>{"--rows", "--features", "--nnz-per-row"}
                                    : std::vector<const char*>{"--users", "--items", "--rank", "--ratings"})
        if (g->count(option))
          throw ConfigError(fmt::format("{} is for --kind {}; {} take {}", option,
                                        gen_kind == "ratings" ? "sparse" : "ratings",
                                        gen_kind == "ratings" ? "ratings" : "sparse rows",
                                        gen_kind == "ratings" ? "--users, --items, --rank and --ratings"
                                                              : "--rows, --features and --nnz-per-row"));
    if (*g && gen_kind == "ratings") {
      rgen.seed = gen.seed;
      if (g->count("--noise")) rgen.noise = gen_noise;
      if (g->count("--zipf")) rgen.zipf_exponent = gen_zipf;
      if (gen_test_out.empty()) rgen.test_ratings = 0;
      else if (!g->count("--test-ratings")) rgen.test_ratings = std::max<std::size_t>(1, rgen.ratings / 10);
      auto r = generate_ratings(rgen);
      save(r.train, gen_out, format_for(gen_out, gen_format));
      if (!gen_test_out.empty()) save(r.test, gen_test_out, format_for(gen_test_out, gen_format));
    } else if (*g) {
      gen.noise = gen_noise;
      if (g->count("--zipf")) gen.zipf_exponent = gen_zipf;
      if (gen.nnz_per_row > gen.features)
        throw ConfigError(fmt::format("--nnz-per-row ({}) cannot exceed --features ({})",
                                      gen.nnz_per_row, gen.features));
      // The test rows are drawn after the training rows from the same hidden model,
      // so the training rows are those of the same command without --test-out.
      const std::size_t test_rows = gen_test_out.empty() ? 0
                                    : g->count("--test-rows") ? gen_test_rows
                                                              : std::max<std::size_t>(1, gen.rows / 10);
      if (!gen_test_out.empty() && test_rows == 0)
        throw ConfigError("--test-rows 0: a test set needs rows (or leave out --test-out)");
      const std::size_t train_rows = gen.rows;
      gen.rows += test_rows;
      const Dataset all = generate_sparse(gen);
      save(rows_of(all, 0, train_rows), gen_out, format_for(gen_out, gen_format));
      if (test_rows > 0)
        save(rows_of(all, train_rows, all.rows()), gen_test_out, format_for(gen_test_out, gen_format));
    } else if (*c) {
      const Storage storage = parse_storage(conv_storage);
      const Dataset d = load_dataset(conv_in, conv_labels, {conv_threads, storage});
      if (d.rows() == 0)  // (a file of comments, or none: most likely not the one meant)
        throw ConfigError(fmt::format("{} has no rows: nothing to convert", conv_in));
      save(d, conv_out, conv_format.empty() ? "cache" : conv_format);
    } else if (*i) {
      info(info_in, info_labels, info_threads);
    } else if (*sc) {
      stats(st);
    }
  } catch (const Error& e) {
    std::fflush(stdout);
    std::cerr << "hogwild_data: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::cerr << "hogwild_data: error: out of memory\n";
    return kExitResource;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "hogwild_data: error: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}
