"""scikit-learn estimators over hogwild.train: HogwildClassifier and HogwildRegressor.

    from hogwild.sklearn import HogwildClassifier
    clf = HogwildClassifier(workers=4, epochs=10, lr=0.1).fit(X, y)
    clf.predict(X), clf.predict_proba(X), clf.score(X, y)

Every training option of hogwild.train (hogwild.options()) that makes sense for an
estimator is a keyword-only constructor parameter, '_' for '-'; None keeps the
library's default. The constructors are generated from hogwild.options(), so
inspect.signature, get_params and set_params see every option by name.

Options left out (they make no sense for an estimator):
  checkpoint, checkpoint_every, resume  files of a run's progress; an estimator is
                                        fitted in one call and pickled whole
  save_model, init_from                 the estimator writes its model file itself
                                        (kept as bytes, model_file_) and starts fresh
  nodes, node_rank, rendezvous, iface,  runs across machines: each machine runs
  run_id, join_timeout, sync_every,     its own command
  comm_timeout
  rank, factors                         matrix factorisation (model "mf"), which
                                        trains on (users, items, ratings), not (X, y)
train()'s own arguments (metrics=, summary= paths, verbose, on_epoch, threads,
storage) are not options: the records are kept in metrics_ and summary_.

Fitted state is picklable: the trained model file's bytes (model_file_) are kept,
and the hogwild.Model that predicts (model_) is rebuilt from them on first use.
"""
import os
import tempfile

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from . import load_model, options, train

__all__ = ["HogwildClassifier", "HogwildRegressor"]

# See the module's docstring for why each is left out.
EXCLUDED_OPTIONS = frozenset({
    "checkpoint", "checkpoint_every", "resume", "save_model", "init_from",
    "nodes", "node_rank", "rendezvous", "iface", "run_id", "join_timeout", "sync_every",
    "comm_timeout", "rank", "factors",
})

# Explicit defaults (the rest are None: the library's default, hogwild.options()).
_COMMON_DEFAULTS = {"mode": "hogwild", "workers": 2, "epochs": 10, "lr": 0.1}
_CLASSIFIER_DEFAULTS = dict(_COMMON_DEFAULTS, model=None)  # logistic (2 classes) or softmax
_REGRESSOR_DEFAULTS = dict(_COMMON_DEFAULTS, model="squared", optimizer="adagrad")

_CLASSIFICATION_ONLY = frozenset({"logistic", "hinge", "softmax", "mlp"})
_SCORE_MODELS = frozenset({"hinge", "squared"})  # no probabilities
_DETERMINISTIC_MODES = frozenset({"serial"})
# scikit-learn's checks that fit twice and compare the predictions (1.2).
_TWO_FIT_CHECKS = ("check_fit_idempotent", "check_pipeline_consistency", "check_supervised_y_2d",
                   "check_regressors_int", "check_classifier_data_not_an_array",
                   "check_regressor_data_not_an_array")


def _options():
    return [o for o in options() if o["name"] not in EXCLUDED_OPTIONS]


def _make_init(cls_name, defaults):
    """An __init__ with one keyword-only parameter per option (sklearn's
    get_params reads the signature, and refuses **kwargs)."""
    names = [o["name"] for o in _options()]
    for n in names:
        if not n.isidentifier():
            raise RuntimeError(f"hogwild option {n!r} is not a Python identifier")
    params = ", ".join(f"{n}={defaults.get(n)!r}" for n in names)
    body = "\n".join(f"    self.{n} = {n}" for n in names)
    src = f"def __init__(self, *, {params}):\n{body}\n"
    namespace = {}
    exec(compile(src, f"<hogwild.sklearn {cls_name}.__init__>", "exec"), namespace)  # noqa: S102
    init = namespace["__init__"]
    init.__qualname__ = f"{cls_name}.__init__"
    init.__module__ = __name__
    return init


def _params_doc(defaults, notes):
    lines = ["Parameters", "----------"]
    for o in _options():
        default = defaults.get(o["name"])
        shown = notes.get(o["name"], repr(default) if default is not None
                          else f"None (the library's: {o['default'] or 'unset'})")
        kind = "bool" if o["flag"] else (o["value"] or "value")
        lines.append(f"{o['name']} : {kind}, default={shown}")
        lines.append(f"    {o['help']}" + (f" ({o['range']})" if o["range"] else ""))
    return "\n".join(lines)


def _memfd_path_load(data):
    """A hogwild.Model from a model file's bytes, without a file on disk where the
    system allows it (memfd), else through a temporary file."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("hogwild-model", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            return load_model(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    with tempfile.TemporaryDirectory(prefix="hogwild-") as d:
        path = os.path.join(d, "model.safetensors")
        with open(path, "wb") as f:
            f.write(data)
        return load_model(path)


class _HogwildBase(BaseEstimator):
    """What both estimators share: option handling, training, the model's bytes."""

    def _train_options(self, n_samples):
        opts = {o["name"]: getattr(self, o["name"]) for o in _options()}
        if opts.get("model") == "mf":
            raise ValueError(f"{type(self).__name__}: model 'mf' trains on (users, items, "
                             "ratings), not (X, y): use hogwild.train")
        w = opts.get("workers")
        # A whole number of workers is capped at the samples (a fold of 3 rows); any
        # other value goes to the trainer as given, which says what is wrong with it.
        if isinstance(w, (int, np.integer)) and not isinstance(w, bool) and 1 <= w:
            opts["workers"] = min(int(w), n_samples)
        return opts

    @staticmethod
    def _rows(X):
        if sp.issparse(X) and not X.has_sorted_indices:
            X = X.sorted_indices()  # the trainer reads sorted columns (else it copies and warns)
        return X

    def _fit_model(self, X, y, opts, **fitted):
        """Trains, then sets the fitted attributes (`fitted`, the model file's bytes,
        the summary and the metrics) together, so a failed fit changes none of them."""
        with tempfile.TemporaryDirectory(prefix="hogwild-sklearn-") as d:
            path = os.path.join(d, "model.safetensors")
            result = train((self._rows(X), y), save_model=path, **opts)
            with open(path, "rb") as f:
                data = f.read()
            model = load_model(path)
        for name, value in fitted.items():
            setattr(self, name, value)
        self.model_file_ = data
        self.__dict__["_model_cache"] = model
        self.output_ = model.metadata.get("output")  # "probabilities" or "score"
        self.summary_ = result.summary
        self.metrics_ = result.metrics

    @property
    def model_(self):
        """The trained hogwild.Model (rebuilt from model_file_ on first use)."""
        m = self.__dict__.get("_model_cache")
        if m is None:
            check_is_fitted(self, "model_file_")
            m = _memfd_path_load(self.model_file_)
            self.__dict__["_model_cache"] = m
        return m

    def _raw(self, X):
        """The model's raw outputs, (rows, outputs), for validated rows."""
        check_is_fitted(self, "model_file_")
        X = self._validate_data(X, accept_sparse="csr", dtype=np.float32, order="C", reset=False)
        return np.asarray(self.model_.decision_function(self._rows(X)))

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_model_cache", None)  # a native object: rebuilt from model_file_
        return state

    def _more_tags(self):
        if self.mode in _DETERMINISTIC_MODES or (self.workers or 1) <= 1:
            return {}
        # Racing workers: two fits on the same data differ (the checks below compare
        # two fits' predictions for equality). Every other check applies.
        why = (f"mode={self.mode!r} with {self.workers} workers is not reproducible by design "
               "(lock-free updates land in whatever order the workers reach them), and this "
               "check compares two fits for equality")
        return {"_xfail_checks": {name: why for name in _TWO_FIT_CHECKS}}


class HogwildClassifier(ClassifierMixin, _HogwildBase):
    """A linear or MLP classifier trained by hogwild (lock-free parallel SGD).

    Classes are encoded 0..K-1 for training (classes_ holds them, sorted); model
    None trains "logistic" for 2 classes and "softmax" for more. Also "hinge" and
    "squared" (binary: scores, no predict_proba) and "mlp".

    Fitted attributes: classes_, n_features_in_ (feature_names_in_ for frames),
    model_file_ (the model file's bytes), model_ (the hogwild.Model), summary_ and
    metrics_ (the run's summary and evaluation records).
    """

    def fit(self, X, y):
        X, y = self._validate_data(X, y, accept_sparse="csr", dtype=np.float32, order="C")
        check_classification_targets(y)
        classes, encoded = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes, but the "
                             f"data has one class only: {classes[0]!r}")
        opts = self._train_options(X.shape[0])
        if opts.get("model") is None:
            opts["model"] = "logistic" if len(classes) == 2 else "softmax"
        elif opts["model"] in _SCORE_MODELS and len(classes) > 2:
            # (The trainer would take squared's codes 0..K-1 for a regression, and
            # predict() would threshold one score: never a class past the second.)
            raise ValueError(f"model={opts['model']!r} is binary, but y has {len(classes)} classes; "
                             "use model='softmax' (or None) for more than 2")
        self._fit_model(X, encoded.astype(np.float32), opts, classes_=classes)
        return self

    def _has_proba(self):
        if "model_file_" in self.__dict__:
            return self.output_ == "probabilities"
        return self.model not in _SCORE_MODELS

    def _scores(self, X):
        """Binary: P(positive) or the score (rows,); more classes: (rows, K) probabilities."""
        out = self._raw(X)
        if self.output_ != "probabilities":
            return out[:, 0].astype(np.float64)
        if out.shape[1] == 2:
            return out[:, 1].astype(np.float64)
        return out.astype(np.float64)

    def decision_function(self, X):
        """Binary: (rows,), > 0 for classes_[1] (log-odds, or the score of hinge and
        squared); more classes: (rows, K) log-probabilities."""
        s = self._scores(X)
        tiny = np.finfo(np.float64).tiny
        if self.output_ != "probabilities":
            return s
        if s.ndim == 1:
            return np.log(np.maximum(s, tiny)) - np.log(np.maximum(1.0 - s, tiny))
        return np.log(np.maximum(s, tiny))

    def predict(self, X):
        s = self._scores(X)
        if s.ndim == 1:
            threshold = 0.5 if self.output_ == "probabilities" else 0.0
            return self.classes_[(s > threshold).astype(np.intp)]
        return self.classes_[np.argmax(s, axis=1)]

    @available_if(_has_proba)
    def predict_proba(self, X):
        """(rows, K) class probabilities, columns in the order of classes_."""
        s = self._scores(X)  # NotFittedError first
        if self.output_ != "probabilities":
            raise AttributeError(f"model {self.model_.model} gives scores, not probabilities")
        return np.column_stack([1.0 - s, s]) if s.ndim == 1 else s

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))


class HogwildRegressor(RegressorMixin, _HogwildBase):
    """A linear least-squares regressor ("squared") trained by hogwild.

    The target is standardised for training (centred unless no_bias, divided by
    its standard deviation) and predictions are mapped back: the loss and the L2
    penalty scale alike, so the minimiser is the same, and one step size suits
    targets of any scale. The default optimiser is AdaGrad, whose per-coordinate
    steps stay bounded on unscaled features (plain SGD on squared loss diverges
    once lr * |x|^2 > 2; scale X, e.g. with StandardScaler, to use it).
    A target with 2 distinct values or fewer is binary to the trainer, which then
    regresses on -1/+1; predictions are mapped back to the target's values.
    Regressors have no decision_function (scikit-learn's convention).

    Fitted attributes: n_features_in_, model_file_, model_, summary_, metrics_,
    target_center_, target_scale_ (the standardisation), target_range_ (the two
    values of a binary target, else None).
    """

    def fit(self, X, y):
        X, y = self._validate_data(X, y, accept_sparse="csr", dtype=np.float32, order="C",
                                   y_numeric=True)
        opts = self._train_options(X.shape[0])
        if opts.get("model") in _CLASSIFICATION_ONLY:
            raise ValueError(f"{type(self).__name__}: model {opts['model']!r} is a classifier; "
                             "use HogwildClassifier (or model='squared')")
        y = np.asarray(y, dtype=np.float64)
        center, scale = 0.0, 1.0
        if len(np.unique(y.astype(np.float32))) > 2:
            center = 0.0 if self.no_bias else float(y.mean())
            scale = float(np.sqrt(np.mean((y - center) ** 2)))
            if not np.isfinite(scale) or scale == 0:
                scale = 1.0
        t = ((y - center) / scale).astype(np.float32)
        values = np.unique(t)
        target_range = None
        if len(values) <= 2:
            # Binary to the trainer: it fits lo -> -1, hi -> +1. One value: zeros
            # (the trainer wants two classes otherwise); predictions are that value.
            target_range = (float(values[0]), float(values[-1]))
            if len(values) == 1:
                t = np.zeros_like(t)
        self._fit_model(X, t, opts, target_center_=center, target_scale_=scale,
                        target_range_=target_range)
        return self

    def predict(self, X):
        z = self._raw(X)[:, 0].astype(np.float64)
        if self.target_range_ is not None:
            lo, hi = self.target_range_
            z = lo + (z + 1.0) * 0.5 * (hi - lo)
        return z * self.target_scale_ + self.target_center_


for _cls, _defaults, _notes in (
        (HogwildClassifier, _CLASSIFIER_DEFAULTS,
         {"model": "None (logistic for 2 classes, softmax for more)"}),
        (HogwildRegressor, _REGRESSOR_DEFAULTS, {})):
    _cls.__init__ = _make_init(_cls.__name__, _defaults)
    _cls.__doc__ = (f"{_cls.__doc__.rstrip()}\n\n    "
                    + _params_doc(_defaults, _notes).replace("\n", "\n    "))
del _cls, _defaults, _notes
