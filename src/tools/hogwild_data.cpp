// hogwild_data: make, convert and inspect datasets for hogwild_train.
//   hogwild_data generate --rows 100000 --features 50000 --nnz-per-row 40 --out syn.svm.gz
//   hogwild_data generate --kind ratings --users 5000 --items 2000 --rank 10
//                         --ratings 1000000 --noise 0.5 --out r.tsv --test-out r.test.tsv
//   hogwild_data convert spam.train.svm.gz --out spam.train.cache
//   hogwild_data info train-images-idx3-ubyte.gz
// Exit status: 0 ok, 2 bad input or option, 4 out of memory or disk, 1 otherwise.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>

#include "hogwild/config.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace {

using namespace hogwild;

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
  fmt::print("wrote {}: {} rows, {} features, {} non-zeros ({})\n", out, d.rows(), d.cols(),
             d.nnz(),
             format == "cache" ? fmt::format("binary cache, {}", to_string(d.layout()))
             : ratings         ? (out.ends_with(".gz") ? "ratings, gzip" : "ratings")
             : out.ends_with(".gz") ? "libsvm, gzip"
                                    : "libsvm");
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

void info(const std::string& path, const std::string& labels, unsigned threads) {
  const FileFormat format = detect_format(path);
  const auto t0 = std::chrono::steady_clock::now();
  // As the file holds it (the infinite density keeps sparse text sparse).
  Dataset d = load_dataset(path, labels,
                           {threads, Storage::automatic, std::numeric_limits<double>::infinity()});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DatasetStats st = describe(d);
  const double cells = static_cast<double>(st.rows) * static_cast<double>(st.cols);
  fmt::print("file:       {} ({}, {})\n", path, format_name(format),
             to_string(d.layout()));
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Generate, convert and inspect datasets for hogwild_train.", "hogwild_data"};
  app.set_version_flag("--version", std::string("hogwild_data ") + HOGWILD_VERSION);
  app.require_subcommand(1);

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
      ->check(CLI::PositiveNumber);
  g->add_option("--features", gen.features, "Number of features (columns)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{4294967295}));
  g->add_option("--nnz-per-row", gen.nnz_per_row, "Non-zeros in each row (at most --features)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
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
      ->capture_default_str()->check(CLI::PositiveNumber);
  g->add_option("--test-out", gen_test_out,
                "ratings: also write test ratings from the same hidden model to FILE");
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
  c->add_option("--threads", conv_threads, "Parser threads (0 = all cores)")->capture_default_str();
  c->add_option("--storage", conv_storage,
                "Rows in the cache: sparse, dense (bytes when every value is k/255), or auto "
                "(dense from the density where the dense kernels win, as hogwild_train loads)")
      ->capture_default_str();

  std::string info_in, info_labels;
  unsigned info_threads = 0;
  auto* i = app.add_subcommand("info", "Print rows, features, non-zeros, density and label counts");
  i->add_option("file", info_in, "libsvm (.gz too), IDX images or a cache")->required();
  i->add_option("--labels", info_labels,
                "IDX labels file (default: guessed from the images file name)");
  i->add_option("--threads", info_threads, "Parser threads (0 = all cores)")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with status 0.
    return app.exit(e) == 0 ? kExitOk : kExitBadInput;
  }

  try {
    if (*g && gen_kind == "ratings") {
      rgen.seed = gen.seed;
      if (g->count("--noise")) rgen.noise = gen_noise;
      if (gen_zipf >= 0) rgen.zipf_exponent = gen_zipf;
      if (gen_test_out.empty()) rgen.test_ratings = 0;
      else if (!g->count("--test-ratings")) rgen.test_ratings = std::max<std::size_t>(1, rgen.ratings / 10);
      auto r = generate_ratings(rgen);
      save(r.train, gen_out, format_for(gen_out, gen_format));
      if (!gen_test_out.empty()) save(r.test, gen_test_out, format_for(gen_test_out, gen_format));
    } else if (*g) {
      gen.noise = gen_noise;
      if (gen_zipf >= 0) gen.zipf_exponent = gen_zipf;
      if (gen.nnz_per_row > gen.features)
        throw ConfigError(fmt::format("--nnz-per-row ({}) cannot exceed --features ({})",
                                      gen.nnz_per_row, gen.features));
      save(generate_sparse(gen), gen_out, format_for(gen_out, gen_format));
    } else if (*c) {
      const Storage storage = parse_storage(conv_storage);
      save(load_dataset(conv_in, conv_labels, {conv_threads, storage}), conv_out,
           conv_format.empty() ? "cache" : conv_format);
    } else if (*i) {
      info(info_in, info_labels, info_threads);
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
