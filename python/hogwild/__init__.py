"""hogwild: lock-free parallel SGD across processes that share memory (Hogwild!),
and the modes it is compared with, from Python.

    import hogwild
    r = hogwild.train((X, y), test=(Xt, yt), model="logistic", mode="hogwild",
                      workers=4, epochs=10, lr=0.5, lr_decay=0.9)
    r.weights["w"], r.metrics, r.summary["samples_per_second"]
    m = hogwild.load_model("m.safetensors"); m.predict(Xt)
    hogwild.stats(X, model="logistic")

Every option of hogwild_train is a keyword, '_' for '-' (hogwild.options() lists
them). Workers are forked by a server process started when this module is
imported, so no worker inherits the interpreter's threads. docs/PYTHON.md.
"""
# First: the compiled half starts the fork server while this process is as bare as
# it will ever be again (before numpy, a BLAS pool or the caller's threads start).
from . import _hogwild  # noqa: I001

import hashlib
import json
import math
import os
import signal
import threading

import numpy as np

from ._data import as_data, rows_of
from ._errors import (ConfigError, ConversionWarning, DataError, Error, InputError,
                      Interrupted, IoError, ResourceError, WorkerError)

__all__ = ["train", "dataset", "load_model", "stats", "options", "release_arena", "Result", "Model",
           "Error", "InputError",
           "DataError", "ConfigError", "IoError", "ResourceError", "WorkerError", "Interrupted",
           "ConversionWarning"]



def __getattr__(name):
    # The fork server's pid, read when asked: a process forked from this one after the
    # import (multiprocessing) starts its own at its first run.
    if name == "fork_server_pid":
        return _hogwild.fork_server_pid()
    raise AttributeError(f"module 'hogwild' has no attribute {name!r}")


def release_arena():
    """Frees the shared memory kept from the last run for the next run of its size
    (up to 64 MiB; it goes with the process anyway)."""
    _hogwild.release_arena()


def options():
    """Every training option: name (the keyword), flag, value, range, mode, concern,
    help and default (as the command line's text; worker_start is always the fork
    server's here)."""
    out = _hogwild.options()
    for o in out:
        if o["name"] == "worker_start":
            o["default"] = "fork-server"
    return out


_FLAGS = None


def _option_text(name, value):
    global _FLAGS
    if _FLAGS is None:
        _FLAGS = {o["name"] for o in _hogwild.options() if o["flag"]}
    if hasattr(value, "item") and np.ndim(value) == 0:
        value = value.item()  # a numpy scalar, or an array of none dimension (np.array(0.1))
    if isinstance(value, bool):
        return "true" if value else "false"
    if name in _FLAGS:
        raise ConfigError(f"{name} is a flag: give True or False, not {value!r}")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)) or (hasattr(value, "tolist") and hasattr(value, "__len__")):
        return ",".join(str(v) for v in (value.tolist() if hasattr(value, "tolist") else value))
    return str(value)


def _option_texts(kwargs):
    out = {}
    for name, value in kwargs.items():
        if value is None:
            continue  # the option's default
        out[name.replace("_", "-")] = _option_text(name, value)
    return out


def dataset(data, *, labels="", threads=0, what="data"):
    """`data` (a path, (X, y) or (users, items, ratings)) checked and copied once into
    a memory file, for several runs: train(), stats() and Model.evaluate() take it as
    they take the arrays, skip the checks, and every run's workers map that file
    instead of a new copy of the rows (a sweep's runs then pay only for training).
    Changing the arrays afterwards does not change it."""
    return _hogwild.in_memory_file(as_data(data, what, labels, threads))


class Result:
    """A finished run: the final weights (numpy arrays the result owns), the
    evaluations (`metrics`, the records of --metrics' JSON lines) and the summary
    (--summary's object)."""

    def __init__(self, native):
        self.weights = dict(native["weights"])
        self.metrics = [json.loads(m) for m in native["metrics"]]
        self.summary = json.loads(native["summary"])
        self.line = native["line"]

    @property
    def test(self):
        """The final weights' test figures: loss, accuracy (or rmse)."""
        s = self.summary
        return {k: s.get(k) for k in ("test_loss", "test_accuracy", "test_rmse") if k in s}

    @property
    def weights_sha256(self):
        """SHA-256 of the final weights, the summary's `weights_sha256` (a --summary
        file's, the CLI's): tensor by tensor in ascending order of name, the name, a
        zero byte, the count as a little-endian u64, the values as little-endian
        float32. Computed when asked (about 3 ms a MB)."""
        h = hashlib.sha256()
        for name in sorted(self.weights, key=lambda n: n.encode()):
            values = self.weights[name].astype("<f4", copy=False).ravel()
            h.update(name.encode() + b"\0")
            h.update(int(values.size).to_bytes(8, "little"))
            h.update(values.tobytes())
        return h.hexdigest()

    def metrics_frame(self):
        """The metrics as a pandas DataFrame (pandas is not a dependency otherwise)."""
        import pandas as pd
        return pd.DataFrame(self.metrics)

    def __repr__(self):
        return f"<hogwild.Result {self.line}>"


def _same_width(data, test):
    """Dense rows say their width: a test set of another one than the training rows'
    is a mistake (a file's rows, or CSR's, have the columns they mention, and the
    others are zeros). The training rows' width: a dense array's or data set's, or a
    scipy matrix's shape."""
    def width(d, dense_only):
        if isinstance(d, _hogwild.Data):
            return d.cols if d.layout.startswith("dense") else None
        if isinstance(d, tuple) and len(d) == 2 and hasattr(d[0], "shape") and len(d[0].shape) == 2:
            return None if dense_only and hasattr(d[0], "nnz") else d[0].shape[1]
        return None
    a, b = width(data, False), width(test, True)
    if a is not None and b is not None and a != b:
        raise ConfigError(f"test: rows of {b} columns for training rows of {a}")


def train(data, test=None, *, labels="", test_labels="", threads=0, storage="auto",
          on_epoch=None, verbose=False, metrics=None, summary=None, **options):
    """Trains on `data` and returns a Result.

    data, test: a path in any format hogwild_train reads (labels=/test_labels= name
    an IDX labels file), (X, y) with X a float32 or uint8 numpy array or a scipy CSR
    matrix, or (users, items, ratings) for matrix factorisation.
    options: hogwild_train's, with '_' for '-' (model="softmax", workers=4,
    lr_decay=0.9, hidden=[256, 128], metrics_every...). None keeps an option's default.
    on_epoch: called with each evaluation's record (a dict), in this thread; an
    exception it raises stops the run and is raised here.
    verbose: print each evaluation's line, as hogwild_train does.
    metrics, summary: paths to also write the JSON-lines metrics and the summary to.
    Raises an hogwild.Error subclass on failure; Ctrl-C stops the run after the
    workers' current batch (final checkpoint and model written) and raises
    hogwild.Interrupted (a KeyboardInterrupt) with the run so far as its `result`.
    """
    if metrics is True or metrics is False:
        metrics = None  # the records are always in Result.metrics
    if summary is False:
        summary = None  # (Result.summary has it)
    for name, path in (("metrics", metrics), ("summary", summary)):
        if path is not None and not isinstance(path, (str, bytes, os.PathLike)):
            raise ConfigError(f"{name}: a path to write to, not {path!r}")
    metrics, summary = (os.fsdecode(p) if p is not None else None for p in (metrics, summary))
    texts = _option_texts(options)
    _same_width(data, test)
    train_set = as_data(data, "train", labels, threads)
    test_set = as_data(test, "test", test_labels, threads) if test is not None else None

    def progress(record, line):
        if verbose:
            print(line, flush=True)
        if on_epoch is not None:
            on_epoch(json.loads(record))

    # Only the main thread owns SIGINT: a run in another thread leaves it to Python,
    # and so does a program that ignores it.
    signals = (threading.current_thread() is threading.main_thread()
               and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)
    _hogwild.ensure_fork_server()  # this process's (a fork of the importer starts its own)
    # The files read, which no output may overwrite (the arrays' are not files).
    input_files = [(what, os.fspath(f)) for what, f in (("data", data), ("test", test),
                                                        ("labels", labels), ("test_labels", test_labels))
                   if isinstance(f, (str, os.PathLike)) and os.fspath(f)]
    native = _hogwild.train(train_set, test_set, texts, storage,
                            progress if (verbose or on_epoch is not None) else None,
                            signals, metrics or "", summary or "", input_files)
    result = Result(native)
    if verbose:
        print(result.line, flush=True)
    if native["signal"]:
        e = Interrupted(f"training stopped by {signal.Signals(native['signal']).name}")
        e.signal = native["signal"]
        e.exit_code = 128 + native["signal"]  # (130 SIGINT, 143 SIGTERM, 129 SIGHUP)
        e.result = result
        raise e
    return result


class Model:
    """A trained model read from a model file (--save-model, save_model=):
    predict, predict_proba and evaluate on numpy or CSR rows, in parallel over the
    cores, with the GIL released."""

    def __init__(self, native):
        self._p = native
        self.model = native.model
        self.metadata = dict(native.metadata)
        features = self.metadata.get("features")
        self._features = int(features) if features is not None and str(features).isdigit() else None

    @property
    def weights(self):
        return dict(self._p.weights)

    @property
    def outputs(self):
        return self._p.outputs

    def predict(self, X):
        """Each row's predicted label (as the training data wrote labels) or value."""
        return self._p.predict(rows_of(X, features=self._features))

    def predict_proba(self, X):
        """Each row's class probabilities, (rows, classes); binary models give
        (P(negative), P(positive)). ConfigError for a model without probabilities."""
        if not self._p.probabilities:
            raise ConfigError(f"model {self.model} gives scores, not probabilities")
        return self._p.outputs_of(rows_of(X, features=self._features))

    def decision_function(self, X):
        """Each row's raw outputs: probabilities, a score or a value, (rows, outputs)."""
        return self._p.outputs_of(rows_of(X, features=self._features))

    def evaluate(self, data):
        """Accuracy, log loss and AUC (classifiers) or RMSE and MAE against the labels."""
        if isinstance(data, _hogwild.Data):
            rows_of(data, "data", self._features)  # dense rows of the model's width
        elif isinstance(data, tuple) and len(data) == 2 and not hasattr(data[0], "nnz"):
            rows_of(data[0], "data", self._features)
        return self._p.evaluate(as_data(data, "data"))

    def __repr__(self):
        return f"<hogwild.Model {self.model}, {self.outputs} output(s)>"


def load_model(path):
    """Reads a model file written by --save-model (or train(save_model=...))."""
    return Model(_hogwild.load_model(str(path)))


def stats(data, model="logistic", *, labels="", classes=0, rank=10, bias=True, rho="auto",
          tau=(1, 2, 4, 8, 16), pairs=200000, top=10, seed=1, threads=0):
    """hogwild_data stats' figures as a dict for `data` (rows alone, X, or anything
    train() takes): Omega, Delta, rho (or its bounds), the
    conflict probability and degree, the hot coordinates and the theories' views at
    each staleness in `tau`."""
    try:
        taus = [float(t) for t in tau]
    except (TypeError, ValueError):
        raise ConfigError(f"tau: a list of staleness values, not {tau!r}") from None
    if not all(math.isfinite(t) and t >= 1 for t in taus):
        raise ConfigError(f"tau: each staleness is a number of 1 or more, got {tau!r}")
    counts = {}
    for name, value, least, most in (("classes", classes, 0, 2**64 - 1), ("rank", rank, 0, 2**64 - 1),
                                     ("pairs", pairs, 1, 2**32 - 2), ("top", top, 0, 2**64 - 1),
                                     ("seed", seed, 0, 2**64 - 1)):
        # (numpy's integers too; each fits what the library takes it in.)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or \
                not least <= int(value) <= most:
            raise ConfigError(f"{name}: a whole number of {least} to {most}, not {value!r}")
        counts[name] = int(value)
    if not isinstance(bias, bool):
        raise ConfigError(f"bias: True or False, not {bias!r}")
    if hasattr(data, "shape") and not isinstance(data, tuple):  # rows alone: X
        d = rows_of(data, "data")
    else:
        d = as_data(data, "data", labels, threads)
    return json.loads(_hogwild.stats(d, model, counts["classes"], counts["rank"], bias, rho, taus,
                                     counts["pairs"], counts["top"], counts["seed"]))
