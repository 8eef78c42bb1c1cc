"""Turns what a user holds (a path, numpy and scipy arrays) into the trainer's data
set, checking shapes and saying every conversion that copies or changes values."""
import os
import warnings

import numpy as np

from . import _hogwild
from ._errors import ConfigError, ConversionWarning, DataError


def _caller_level():
    """The stack level of the first frame outside this package (the user's call)."""
    import sys
    level, frame = 1, sys._getframe(1)
    here = os.path.dirname(__file__)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == here:
        frame, level = frame.f_back, level + 1
    return level


def _warn(what, text):
    warnings.warn(f"{what}: {text}", ConversionWarning, stacklevel=_caller_level())


def _labels(y, rows, what):
    y = np.asarray(y)
    if y.ndim != 1:
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        else:
            raise ConfigError(f"{what}: labels must be one value per row, got shape {y.shape}")
    if y.shape[0] != rows:
        raise ConfigError(f"{what}: {rows} rows but {y.shape[0]} labels")
    if y.dtype.kind not in "biuf":
        raise DataError(f"{what}: labels must be numbers, not {y.dtype} (encode them first, "
                        "or use hogwild.sklearn's estimators, which do)")
    if y.dtype == np.float32:
        return np.ascontiguousarray(y)
    with np.errstate(over="ignore"):
        y32 = y.astype(np.float32)
    with np.errstate(invalid="ignore"):
        overflow = np.flatnonzero(np.isfinite(y) & ~np.isfinite(y32))
        if overflow.size:
            r = int(overflow[0])
            raise DataError(f"{what}: row {r}: the label {y[r]!r} does not fit a float32")
        changed = np.flatnonzero((y32 != y) & np.isfinite(y))
    if changed.size:
        r = int(changed[0])
        _warn(what, f"labels of dtype {y.dtype} rounded to float32 ({changed.size} changed, "
                    f"the first at row {r}: {y[r]!r} -> {y32[r]!r})")
    return y32


def _values32(v, what, where):
    """float64 (or other number) values as float32, refusing a finite one past a
    float's range (it became inf, and the reader said "not a finite number")."""
    with np.errstate(over="ignore"):
        v32 = v.astype(np.float32)
    with np.errstate(invalid="ignore"):
        overflow = np.flatnonzero(np.isfinite(v) & ~np.isfinite(v32))
    if overflow.size:
        raise DataError(f"{what}: {where(int(overflow[0]))}: the value {v.flat[overflow[0]]!r} does not "
                        "fit a float32")
    return v32


def _check_indptr(X, what):
    """The offsets, checked before scipy reads them (its sort runs past the arrays
    of a matrix whose indptr goes backwards)."""
    p, rows = np.asarray(X.indptr), X.shape[0]
    if p.shape != (rows + 1,):
        raise DataError(f"{what}: indptr has {p.shape[0]} entries for {rows} rows (rows + 1 expected)")
    if p[0] != 0 or p[-1] != X.data.shape[0] or X.indices.shape[0] != X.data.shape[0]:
        raise DataError(f"{what}: indptr runs from {p[0]} to {p[-1]} for {X.data.shape[0]} stored "
                        "values (0 to that many expected)")
    back = np.flatnonzero(np.diff(p.astype(np.int64)) < 0)
    if back.size:
        raise DataError(f"{what}: row {int(back[0])}: indptr goes backwards")


def _csr(X, y, what):
    import scipy.sparse as sp
    if not sp.isspmatrix_csr(X) and not (hasattr(sp, "csr_array") and isinstance(X, sp.csr_array)):
        _warn(what, f"a {type(X).__name__} is converted to CSR (a copy)")
        X = sp.csr_matrix(X)
    _check_indptr(X, what)
    for name in ("indices", "indptr"):
        a = getattr(X, name)
        if a.dtype not in (np.int32, np.int64):
            if a.dtype.kind not in "iu" or (a.size and a.max() > np.iinfo(np.int64).max):
                raise DataError(f"{what}: {name} of dtype {a.dtype}")
            _warn(what, f"{name} of dtype {a.dtype} are widened to int64 (a copy)")
            X = sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)),
                              shape=X.shape)
    if not X.data.flags.c_contiguous:
        _warn(what, "the values are not contiguous: copied")
        X = sp.csr_matrix((np.ascontiguousarray(X.data), X.indices, X.indptr), shape=X.shape)
    if X.dtype != np.float32:
        if X.dtype.kind not in "biuf":
            raise DataError(f"{what}: values must be numbers, not {X.dtype}")
        _warn(what, f"values of dtype {X.dtype} are converted to float32 (a copy)")

        def where(k):
            row = int(np.searchsorted(X.indptr, k, side="right")) - 1
            return f"row {row}, column {int(X.indices[k])}"
        X = sp.csr_matrix((_values32(X.data, what, where), X.indices, X.indptr), shape=X.shape)
    if not X.has_sorted_indices:
        _warn(what, "columns within rows are not sorted: sorted in a copy")
        X = X.sorted_indices()
    rows, cols = X.shape
    y = _labels(y, rows, what)
    p, i = X.indptr, X.indices
    if p.dtype == np.int32 and i.dtype == np.int32:
        return _hogwild.data_from_csr32(p, i, X.data, y, cols, what)
    if p.dtype == np.int64 and i.dtype == np.int32:
        return _hogwild.data_from_csr_mixed(p, i, X.data, y, cols, what)
    return _hogwild.data_from_csr64(p.astype(np.int64, copy=False), i.astype(np.int64, copy=False),
                                    X.data, y, cols, what)


def _dense(X, y, what):
    X = np.asarray(X)
    if X.ndim != 2:
        raise ConfigError(f"{what}: rows must be a 2-D array, got {X.ndim} dimension(s)")
    if X.dtype == np.uint8:
        reader = _hogwild.data_from_bytes  # value = byte / 255, as IDX images hold them
    else:
        if X.dtype != np.float32:
            if X.dtype.kind not in "biuf":
                raise DataError(f"{what}: values must be numbers, not {X.dtype}")
            _warn(what, f"values of dtype {X.dtype} are converted to float32 (a copy)")
            cols = X.shape[1]
            X = _values32(X, what, lambda k: f"row {k // cols}, column {k % cols}")
        reader = _hogwild.data_from_dense
    if not X.flags.c_contiguous:
        _warn(what, "the array is not C-contiguous: copied")
        X = np.ascontiguousarray(X)
    return reader(X, _labels(y, X.shape[0], what), what)


def _ids(a, name, what):
    a = np.asarray(a)
    if a.ndim != 1:
        raise ConfigError(f"{what}: {name} must be 1-D")
    if a.dtype.kind not in "iu":
        raise DataError(f"{what}: {name} must be integer ids, not {a.dtype}")
    return a.astype(np.int64, copy=False)


def as_data(data, what="train", labels="", threads=0):
    """A data set for the trainer from a path, (X, y) or (users, items, ratings)."""
    if isinstance(data, _hogwild.Data):
        return data
    # (hogwild_train's --threads: 0, all cores, to 1024; a pybind TypeError before.)
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer)) or \
            not 0 <= int(threads) <= 1024:
        raise ConfigError(f"threads: 0 (all cores) to 1024, not {threads!r}")
    threads = int(threads)
    if labels and not isinstance(data, (str, os.PathLike)):
        raise ConfigError(f"{what}: a labels file goes with an images path, not with arrays")
    if isinstance(data, (str, os.PathLike)):
        return _hogwild.data_from_file(os.fspath(data), os.fspath(labels) if labels else "", threads)
    if isinstance(data, tuple) and len(data) == 2:
        X, y = data
        if hasattr(X, "tocsr") and hasattr(X, "nnz"):  # scipy.sparse
            return _csr(X, y, what)
        return _dense(X, y, what)
    if isinstance(data, tuple) and len(data) == 3:
        u, i, r = data
        u, i = _ids(u, "users", what), _ids(i, "items", what)
        return _hogwild.data_from_ratings(u, i, _labels(r, u.shape[0], what), what)
    raise ConfigError(f"{what}: give a path, (X, y) with X a numpy array or scipy CSR matrix, "
                      f"or (users, items, ratings); got {type(data).__name__}")


def rows_of(X, what="X", features=None):
    """Rows without labels, for predicting; dense rows must have the model's
    `features` columns (a sparse row's columns past them are features it never saw)."""
    if isinstance(X, _hogwild.Data):
        if X.layout.startswith("dense") and features is not None and X.cols != features:
            raise ConfigError(f"{what}: rows of {X.cols} columns for a model of {features} features")
        return X
    if not hasattr(X, "nnz"):
        if isinstance(X, (str, bytes, os.PathLike)):
            raise ConfigError(f"{what}: rows as an array (or scipy sparse matrix), not a path: "
                              "hogwild.dataset(path) reads a file")
        X = np.asarray(X)
        if X.ndim != 2:
            raise ConfigError(f"{what}: rows must be a 2-D array (or a scipy sparse matrix), got "
                              f"{X.ndim} dimension(s)")
        if features is not None and X.shape[1] != features:
            raise ConfigError(f"{what}: rows of {X.shape[1]} columns for a model of {features} "
                              "features")
    rows = X.shape[0]
    return as_data((X, np.zeros(rows, dtype=np.float32)), what)
