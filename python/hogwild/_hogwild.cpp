// The compiled half of `import hogwild` (pybind11): data sets built from numpy and
// scipy arrays, training through the library's train(), the predictor and the
// sparsity statistics. The Python half (__init__.py) checks dtypes and shapes, says
// what it converts and turns these results into the objects users hold.
//
// Forking is made safe at import: the module starts the fork server before Python
// has run anything of this module's caller past the import (and before numpy or a
// BLAS pool is touched by it), and every run's workers are forked by that server,
// so no worker inherits the interpreter's threads, its GIL or a BLAS thread pool.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hogwild/arena.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/fork_server.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/model_file.hpp"
#include "hogwild/options.hpp"
#include "hogwild/predictor.hpp"
#include "hogwild/sparsity.hpp"
#include "hogwild/trainer.hpp"
#include "file_roles.hpp"

namespace py = pybind11;
using namespace hogwild;

namespace {

// A data set as the trainer reads it (its source names it in errors and the summary),
// and what keeps its arrays alive: the caller's numpy arrays, read in place, and
// the arrays converted for it (CSR offsets as 64-bit, column ids as 32-bit).
struct Data {
  Dataset set;
  std::vector<py::object> arrays = {};
  std::vector<std::shared_ptr<void>> owned = {};
};

[[noreturn]] void row_error(const std::string& what, std::size_t row, const std::string& why) {
  throw DataError(what, 0, "row " + std::to_string(row) + ": " + why);
}

template <class T>
using Array = py::array_t<T, py::array::c_style>;

// CSR rows (scipy's indptr, indices, data) and their labels, checked row by row
// (columns ascending and below `cols`, values and labels finite) and read in place
// where the dtypes are the trainer's (float32 values and labels, int32 column ids,
// int64 offsets); 32-bit offsets and 64-bit ids are converted once. A fork-server
// worker reads the rows from the memory file the run writes them to, as it would a
// file's; the parent (serial, dp) reads the caller's arrays.
template <class Ptr, class Idx>
Data csr(const Array<Ptr>& indptr, const Array<Idx>& indices, const Array<float>& data,
         const Array<float>& labels, std::size_t cols, const std::string& what) {
  const auto rows = static_cast<std::size_t>(labels.size());
  if (static_cast<std::size_t>(indptr.size()) != rows + 1)
    throw ConfigError(what + ": indptr has " + std::to_string(indptr.size()) + " entries for " +
                      std::to_string(rows) + " labels (rows + 1 expected)");
  if (indices.size() != data.size()) throw ConfigError(what + ": indices and data differ in length");
  if (cols == 0 || cols > std::numeric_limits<std::uint32_t>::max())
    throw ConfigError(what + ": " + std::to_string(cols) + " columns (1 to 2^32 - 1 are taken)");
  const auto nnz = static_cast<std::size_t>(data.size());
  const Ptr* p = indptr.data();
  if (p[0] != 0 || static_cast<std::size_t>(p[rows]) != nnz)
    throw ConfigError(what + ": indptr runs from " + std::to_string(p[0]) + " to " +
                      std::to_string(p[rows]) + " for " + std::to_string(nnz) +
                      " stored values (0 to that many expected)");
  const float* y = labels.data();
  for (std::size_t r = 0; r < rows; ++r)
    if (!std::isfinite(y[r])) row_error(what, r, "the label is not a finite number");
  const Idx* ix = indices.data();
  const float* x = data.data();
  for (std::size_t r = 0; r < rows; ++r) {
    if (p[r + 1] < p[r] || static_cast<std::size_t>(p[r + 1]) > nnz)
      row_error(what, r, "indptr goes backwards or past the stored values");
    const auto b = static_cast<std::size_t>(p[r]), e = static_cast<std::size_t>(p[r + 1]);
    for (std::size_t k = b; k < e; ++k) {
      const Idx j = ix[k];
      if (j < 0 || static_cast<std::size_t>(j) >= cols)
        row_error(what, r, "column " + std::to_string(j) + " is outside 0.." + std::to_string(cols - 1));
      if (k > b && ix[k - 1] >= j)
        row_error(what, r, ix[k - 1] == j ? "column " + std::to_string(j) +
                                                " is stored twice (X.sum_duplicates() adds them)"
                                          : std::string("its columns are not in ascending order "
                                                        "(X.sort_indices() sorts them)"));
      if (!std::isfinite(x[k]))
        row_error(what, r, "the value at column " + std::to_string(j) + " is not a finite number");
    }
  }
  Data d;
  d.arrays = {indptr, indices, data, labels};
  const std::uint64_t* offsets;
  if constexpr (std::is_same_v<Ptr, std::int64_t>) {
    offsets = reinterpret_cast<const std::uint64_t*>(p);  // checked: from 0, ascending
  } else {
    auto wide = std::make_shared<std::vector<std::uint64_t>>(p, p + rows + 1);
    offsets = wide->data();
    d.owned.push_back(wide);
  }
  const std::uint32_t* ids;
  if constexpr (std::is_same_v<Idx, std::int32_t>) {
    ids = reinterpret_cast<const std::uint32_t*>(ix);  // checked: 0 or more
  } else {
    auto narrow = std::make_shared<std::vector<std::uint32_t>>(ix, ix + nnz);
    ids = narrow->data();
    d.owned.push_back(narrow);
  }
  d.set = Dataset::view(nullptr, hogwild::Layout::sparse, rows, cols, y, offsets, ids, x, what);
  return d;
}

// Dense rows of floats, or of bytes (value = byte / 255, as IDX images), read in place.
template <class T>
Data dense(const py::array_t<T, py::array::c_style>& x, const Array<float>& labels,
           const std::string& what) {
  if (x.ndim() != 2) throw ConfigError(what + ": dense rows need a 2-D array");
  const auto rows = static_cast<std::size_t>(x.shape(0)), cols = static_cast<std::size_t>(x.shape(1));
  if (static_cast<std::size_t>(labels.size()) != rows)
    throw ConfigError(what + ": " + std::to_string(rows) + " rows and " +
                      std::to_string(labels.size()) + " labels");
  if (cols == 0) throw ConfigError(what + ": rows of 0 columns");
  const float* y = labels.data();
  for (std::size_t r = 0; r < rows; ++r)
    if (!std::isfinite(y[r])) row_error(what, r, "the label is not a finite number");
  const T* in = x.data();
  if constexpr (std::is_same_v<T, float>) {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        if (!std::isfinite(in[r * cols + c]))
          row_error(what, r, "the value at column " + std::to_string(c) + " is not a finite number");
  }
  Data d;
  d.arrays = {x, labels};
  if constexpr (std::is_same_v<T, float>)
    d.set = Dataset::view(nullptr, hogwild::Layout::dense, rows, cols, y, nullptr, nullptr, in, what);
  else
    d.set = Dataset::view_u8(nullptr, rows, cols, y, in, what);
  return d;
}

Dataset ratings(const Array<std::int64_t>& users, const Array<std::int64_t>& items,
                const Array<float>& values, const std::string& what) {
  const auto rows = static_cast<std::size_t>(values.size());
  if (static_cast<std::size_t>(users.size()) != rows || static_cast<std::size_t>(items.size()) != rows)
    throw ConfigError(what + ": users, items and ratings differ in length");
  std::vector<std::uint32_t> u(rows), i(rows);
  const float* y = values.data();
  for (std::size_t r = 0; r < rows; ++r) {
    for (auto [id, name, out] : {std::tuple{users.data()[r], "user", &u[r]},
                                 std::tuple{items.data()[r], "item", &i[r]}}) {
      if (id < 0 || id > static_cast<std::int64_t>(kMaxRatingId))
        row_error(what, r, std::string(name) + " id " + std::to_string(id) + " is outside 0.." +
                               std::to_string(kMaxRatingId));
      *out = static_cast<std::uint32_t>(id);
    }
    if (!std::isfinite(y[r])) row_error(what, r, "the rating is not a finite number");
  }
  return Dataset::ratings({y, rows}, u, i, what);
}

// --- options ---------------------------------------------------------------

// The configuration from the Python keywords (each already as the text the command
// line takes), read through the one option declaration.
TrainConfig config_from(const std::map<std::string, std::string>& options) {
  TrainConfig cfg;
  for (const auto& [name, value] : options) {
    const OptionInfo* o = find_option(name);
    if (!o || !o->command_line) {
      std::string key = name;
      for (char& ch : key)
        if (ch == '-') ch = '_';
      throw ConfigError("there is no option " + key + " (hogwild.options() lists them)");
    }
    o->set(cfg, value);
  }
  if (options.count("worker-start") && cfg.worker_start != WorkerStart::fork_server)
    throw ConfigError("worker_start: the module's workers always start from the fork server "
                      "(a Python process cannot be forked safely)");
  cfg.worker_start = WorkerStart::fork_server;
  cfg.result_parameters = true;
  return cfg;
}

py::list option_table() {
  static const TrainConfig defaults;
  py::list out;
  for (const auto& o : train_options()) {
    if (!o.command_line) continue;
    std::string key = o.name;
    for (char& ch : key)
      if (ch == '-') ch = '_';
    py::dict d;
    d["name"] = key;
    d["flag"] = o.value_text.empty();
    d["value"] = o.value_text;
    d["range"] = o.range;
    d["mode"] = o.mode;
    d["concern"] = to_string(o.concern);
    d["help"] = o.help;
    d["default"] = o.get(defaults);
    out.append(d);
  }
  return out;
}

// --- the GIL around a run ------------------------------------------------------

// A thread still training when the interpreter exits (a daemon thread) must not
// take the GIL back: Python ends such a thread with a forced unwind, which the C++
// frames below it turn into std::terminate. It waits for the process's end instead
// (its workers die with the process, and the fork server with them).
[[noreturn]] void park_until_exit() {
  for (;;) ::pause();
}

// The GIL released for a run, taken back at its end.
class Unlocked {
 public:
  Unlocked() : state_(PyEval_SaveThread()) {}
  ~Unlocked() {
    if (_Py_IsFinalizing()) park_until_exit();
    PyEval_RestoreThread(state_);
  }
  Unlocked(const Unlocked&) = delete;
  Unlocked& operator=(const Unlocked&) = delete;

 private:
  PyThreadState* state_;
};

// The GIL taken for a callback from inside a run.
class Locked {
 public:
  Locked() {
    if (_Py_IsFinalizing()) park_until_exit();
    state_ = PyGILState_Ensure();
  }
  ~Locked() { PyGILState_Release(state_); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  PyGILState_STATE state_;
};

// A tensor's values as numpy, shaped as the model declares it (softmax's W:
// classes x its padded row stride; an MLP layer: out x in).
py::array_t<float> shaped(const std::string& name, std::vector<float>&& values,
                          const std::vector<TensorSpec>& specs) {
  std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(values.size())};
  for (const auto& s : specs)
    if (s.name == name && !s.shape.empty()) {
      std::size_t n = 1;
      for (auto k : s.shape) n *= k;
      if (n == values.size()) shape.assign(s.shape.begin(), s.shape.end());
    }
  // The vector itself, owned by the array (no copy of the weights).
  auto* owned = new std::vector<float>(std::move(values));
  py::capsule owner(owned, [](void* v) { delete static_cast<std::vector<float>*>(v); });
  return py::array_t<float>(shape, owned->data(), owner);
}

// --- training ----------------------------------------------------------------

// A Python exception raised by a callback, carried through train() (whose unwinding
// stops the workers and removes the arena) and raised again in the caller.
struct CallbackFailed {
  py::error_already_set error;
};

// The rows as the command line stores them for this model and these options
// (hogwild_train's load(): sparse rows dense from a density, the test set as the
// training set).
Dataset stored_for(const Dataset& d, Storage storage, const TrainConfig& cfg, const hogwild::Model& model) {
  const double dense_at = model.feature_indexed() ? kDenseDensityLinear : kDenseDensity;
  const bool hot_k = cfg.hot_k > 0 && is_parallel(cfg.mode);
  if (hot_k && storage == Storage::automatic && stores_dense(d, storage, dense_at)) return d;
  return with_storage(d, storage, dense_at);
}

// Restores SIGINT's and SIGTERM's handlers as they were (Python's) when train()
// returns: the library keeps its own after a stop, for a CLI that still writes.
class SignalsBack {
 public:
  SignalsBack() {
    sigaction(SIGINT, nullptr, &int_);
    sigaction(SIGTERM, nullptr, &term_);
    sigaction(SIGHUP, nullptr, &hup_);
  }
  ~SignalsBack() {
    sigaction(SIGINT, &int_, nullptr);
    sigaction(SIGTERM, &term_, nullptr);
    sigaction(SIGHUP, &hup_, nullptr);
  }
  SignalsBack(const SignalsBack&) = delete;
  SignalsBack& operator=(const SignalsBack&) = delete;

 private:
  struct sigaction int_ {}, term_ {}, hup_ {};
};

// Lets go of a run's claims of its outputs as it ends: the process goes on.
struct Claims {
  std::vector<int> taken;
  Claims() = default;
  ~Claims() { tools::release_claims(taken); }
  Claims(const Claims&) = delete;
  Claims& operator=(const Claims&) = delete;
};

py::dict train_native(const Data& train_data, const Data* test_data,
                      const std::map<std::string, std::string>& options, const std::string& storage,
                      const py::object& on_progress, bool signals, const std::string& metrics_path,
                      const std::string& summary_path,
                      const std::vector<std::pair<std::string, std::string>>& input_files) {
  TrainConfig cfg = config_from(options);
  cfg.handle_signals = signals;
  cfg.validate();
  // As hogwild_train checks them, before anything is read or written: no output over
  // an input (save_model="data.svm") or over another output, each one writable, and
  // none another run writes now.
  std::vector<tools::FileRole> inputs;
  for (const auto& [what, path] : input_files) inputs.push_back({what, path});
  inputs.push_back({"resume", cfg.resume});
  inputs.push_back({"init_from", cfg.init_from});
  if (const auto costs = options.find("cost-model"); costs != options.end())
    inputs.push_back({"cost_model", costs->second});
  Claims claims;
  tools::check_outputs(inputs,
                       {{"metrics", metrics_path, {}, "metrics"},
                        {"summary", summary_path, {}, "the summary"},
                        {"checkpoint", cfg.checkpoint, "resume", "checkpoints"},
                        {"save_model", cfg.save_model, {}, "the model"}},
                       {}, &claims.taken);
  const Storage store = parse_storage(storage);
  auto model = make_model(cfg.model, cfg.model_options);
  Dataset train = stored_for(train_data.set, store, cfg, *model);
  std::optional<Dataset> test;
  if (test_data) {
    test = stored_like(test_data->set, train);
    if (test->rows() == 0) throw ConfigError("test: no rows, nothing to evaluate on");
  }
  std::optional<MetricsWriter> metrics;
  if (!metrics_path.empty()) metrics.emplace(metrics_path, !cfg.resume.empty());
  std::vector<std::string> records;
  TrainResult result;
  try {
    SignalsBack back;
    Unlocked unlocked;
    result = hogwild::train(cfg, *model, train, test ? &*test : nullptr, [&](const Progress& p) {
      records.push_back(progress_json(p));
      if (metrics) metrics->write(p);
      if (on_progress.is_none() || p.restart) return;
      Locked held;
      try {
        on_progress(records.back(), format_progress(p, cfg.epochs));
      } catch (py::error_already_set& e) {
        throw CallbackFailed{std::move(e)};
      }
    });
  } catch (CallbackFailed& f) {  // the run is stopped and cleaned up: the callback's error
    throw std::move(f.error);
  }
  std::string summary = summary_json(cfg, result, train.source(), test ? test->source() : "");
  if (!summary_path.empty()) write_file_atomically(summary_path, summary + "\n");
  py::dict weights;
  const auto specs = model->parameters();
  for (auto& [name, values] : result.parameters) weights[py::str(name)] = shaped(name, std::move(values), specs);
  py::dict out;
  out["weights"] = weights;
  out["metrics"] = records;
  out["summary"] = summary;
  out["signal"] = result.signal;
  out["line"] = result_line(cfg, result);
  return out;
}

// --- predicting --------------------------------------------------------------

struct Loaded {
  Predictor p;
};

py::array_t<float> predict(const Loaded& m, const Data& data, bool outputs) {
  if (outputs && m.p.outputs() == 0)
    throw ConfigError("model " + m.p.description().model + " gives no per-row outputs");
  Dataset rows = m.p.prepare(data.set);
  const auto n = static_cast<py::ssize_t>(rows.rows());
  const auto k = static_cast<py::ssize_t>(m.p.outputs());
  std::vector<float> labels(rows.rows());
  py::array_t<float> out = outputs ? py::array_t<float>({n, k}) : py::array_t<float>({n});
  {
    py::gil_scoped_release unlocked;
    if (outputs)
      m.p.predict(rows, labels, {out.mutable_data(), static_cast<std::size_t>(n * k)});
    else
      m.p.predict(rows, {out.mutable_data(), static_cast<std::size_t>(n)});
  }
  return out;
}

py::dict evaluate(const Loaded& m, const Data& data) {
  Dataset rows = m.p.prepare(data.set);
  PredictionMetrics e;
  {
    py::gil_scoped_release unlocked;
    e = m.p.evaluate(rows);
  }
  auto num = [](double v) { return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none()); };
  py::dict d;
  d["rows"] = e.rows;
  d["accuracy"] = num(e.accuracy);
  d["log_loss"] = num(e.log_loss);
  d["auc"] = num(e.auc);
  d["rmse"] = num(e.rmse);
  d["mae"] = num(e.mae);
  return d;
}

// --- the exceptions ----------------------------------------------------------

// Raises the hogwild.<name> class that __init__.py defines.
void raise_as(const char* name, const std::string& message) {
  py::object cls = py::module_::import("hogwild._errors").attr(name);
  PyErr_SetObject(cls.ptr(), py::str(message).ptr());
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const DataError& e) {
    py::object cls = py::module_::import("hogwild._errors").attr("DataError");
    py::object err = cls(py::str(e.what()));
    err.attr("file") = e.file();
    err.attr("line") = e.line();
    PyErr_SetObject(cls.ptr(), err.ptr());
  } catch (const ConfigError& e) {
    raise_as("ConfigError", e.what());
  } catch (const IoError& e) {
    raise_as("IoError", e.what());
  } catch (const ResourceError& e) {
    raise_as("ResourceError", e.what());
  } catch (const WorkerError& e) {
    raise_as("WorkerError", e.what());
  } catch (const Interrupted& e) {
    raise_as("Interrupted", e.what());
  } catch (const Error& e) {
    raise_as("Error", e.what());
  }
}

}  // namespace

namespace {

// The module's fork server: the program beside this extension (build tree and
// install alike), exec'd so that no worker is a copy of the interpreter's memory;
// a copy of this process where that program is missing.
const char kAnchor = 0;
void start_server() {
  Dl_info info{};
  if (dladdr(&kAnchor, &info) && info.dli_fname && std::strchr(info.dli_fname, '/')) {
    std::string program = info.dli_fname;
    program = program.substr(0, program.rfind('/') + 1) + "hogwild-fork-server";
    if (access(program.c_str(), X_OK) == 0) return start_fork_server(program);
  }
  start_fork_server();
}

}  // namespace

PYBIND11_MODULE(_hogwild, m) {
  // First, before this interpreter's caller goes on to start threads: the process
  // that forks every worker of every run (fork_server.hpp).
  start_server();
  py::register_exception_translator(&translate);
  m.doc() = "The compiled half of the hogwild module (use `import hogwild`).";
  m.def("fork_server_pid", [] { return fork_server_pid(); });
  m.def("release_arena", [] { release_spare_arena(); });
  // This process's server: a process forked from the importer (multiprocessing)
  // starts its own at its first run.
  m.def("ensure_fork_server", [] { start_server(); });

  py::class_<Data>(m, "Data")
      .def_property_readonly("rows", [](const Data& d) { return d.set.rows(); })
      .def_property_readonly("cols", [](const Data& d) { return d.set.cols(); })
      .def_property_readonly("nnz", [](const Data& d) { return d.set.nnz(); })
      .def_property_readonly("layout", [](const Data& d) { return std::string(to_string(d.set.layout())); })
      .def_property_readonly("source", [](const Data& d) { return d.set.source(); })
      .def_property_readonly("labels", [](const Data& d) {
        auto y = d.set.labels();
        return py::array_t<float>(static_cast<py::ssize_t>(y.size()), y.data());
      });
  m.def("data_from_file", [](const std::string& path, const std::string& labels, unsigned threads) {
    py::gil_scoped_release unlocked;
    return Data{load_dataset(path, labels, {threads, Storage::automatic,
                                            std::numeric_limits<double>::infinity()})};
  });
  m.def("data_from_csr32", [](const Array<std::int32_t>& p, const Array<std::int32_t>& i,
                              const Array<float>& v, const Array<float>& y, std::size_t cols,
                              const std::string& what) { return csr(p, i, v, y, cols, what); });
  m.def("data_from_csr64", [](const Array<std::int64_t>& p, const Array<std::int64_t>& i,
                              const Array<float>& v, const Array<float>& y, std::size_t cols,
                              const std::string& what) { return csr(p, i, v, y, cols, what); });
  m.def("data_from_csr_mixed", [](const Array<std::int64_t>& p, const Array<std::int32_t>& i,
                                  const Array<float>& v, const Array<float>& y, std::size_t cols,
                                  const std::string& what) { return csr(p, i, v, y, cols, what); });
  m.def("data_from_dense", [](const Array<float>& x, const Array<float>& y, const std::string& what) {
    return dense(x, y, what);
  });
  m.def("data_from_bytes", [](const Array<std::uint8_t>& x, const Array<float>& y, const std::string& what) {
    return dense(x, y, what);
  });
  m.def("data_from_ratings", [](const Array<std::int64_t>& u, const Array<std::int64_t>& i,
                                const Array<float>& r, const std::string& what) {
    return Data{ratings(u, i, r, what)};
  });

  m.def("in_memory_file", [](const Data& d) {
    py::gil_scoped_release unlocked;
    return Data{in_memory_file(d.set)};
  });
  m.def("options", &option_table);
  m.def("check_options", [](const std::map<std::string, std::string>& options) {
    config_from(options).validate();
  });
  m.def("train", &train_native, py::arg("train"), py::arg("test"), py::arg("options"),
        py::arg("storage"), py::arg("on_progress"), py::arg("signals"), py::arg("metrics"),
        py::arg("summary"), py::arg("input_files"));

  py::class_<Loaded>(m, "Predictor")
      .def_property_readonly("model", [](const Loaded& p) { return p.p.description().model; })
      .def_property_readonly("outputs", [](const Loaded& p) { return p.p.outputs(); })
      .def_property_readonly("probabilities", [](const Loaded& p) { return p.p.probabilities(); })
      .def_property_readonly("metadata", [](const Loaded& p) { return model_metadata(p.p.description()); })
      .def("predict", [](const Loaded& p, const Data& d) { return predict(p, d, false); })
      .def("outputs_of", [](const Loaded& p, const Data& d) { return predict(p, d, true); })
      .def("evaluate", &evaluate)
      .def_property_readonly("weights", [](const Loaded& p) {
        py::dict w;
        const ParamSet& ps = p.p.parameters();
        const auto specs = p.p.model().parameters();
        for (std::size_t t = 0; t < ps.count(); ++t)
          w[py::str(ps.tensor(t).name)] =
              shaped(ps.tensor(t).name, std::vector<float>(ps.data(t), ps.data(t) + ps.size(t)), specs);
        return w;
      });
  m.def("load_model", [](const std::string& path) {
    py::gil_scoped_release unlocked;
    return Loaded{load_model(path)};
  });

  m.def("stats", [](const Data& d, const std::string& model, std::size_t classes, std::size_t rank,
                    bool bias, const std::string& rho, const std::vector<double>& taus,
                    std::size_t pairs, std::size_t top, std::uint64_t seed) {
    SparsityOptions o;
    o.model = model;
    o.classes = classes;
    o.rank = rank;
    o.bias = bias;
    if (rho == "exact") o.rho = SparsityOptions::Rho::exact;
    else if (rho == "bounds") o.rho = SparsityOptions::Rho::bounds;
    else if (rho != "auto") throw ConfigError("rho: auto, exact or bounds, not " + rho);
    o.pairs = pairs;
    o.top = top;
    o.seed = seed;
    // Ctrl-C: Python's handler runs (it raises KeyboardInterrupt) where the loops ask.
    o.cancelled = [] {
      py::gil_scoped_acquire held;
      return PyErr_CheckSignals() != 0;
    };
    SparsityStats s;
    bool interrupted = false;
    {
      py::gil_scoped_release unlocked;
      try {
        s = sparsity_stats(d.set, o);
      } catch (const Interrupted&) {
        interrupted = true;
      }
    }
    if (interrupted) throw py::error_already_set();  // the KeyboardInterrupt the handler raised
    std::vector<TheoryView> theory;
    for (double tau : taus) theory.push_back(theory_at(s, tau, bias));
    return sparsity_json(s, theory, d.set.source());
  });
  m.def("cleanup_stale_segments", [] { return cleanup_stale_segments(); });
}
