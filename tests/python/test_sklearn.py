"""hogwild.sklearn: scikit-learn's own conformance checks (parametrize_with_checks) on
HogwildClassifier and HogwildRegressor, serial (deterministic) and hogwild with two
racing workers, and the estimators inside Pipeline, GridSearchCV and
cross_val_score. Checks that cannot apply are marked by the estimators' own
_xfail_checks tag, with its reason."""
import inspect
import os
import pickle
import tempfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import hogwild
from hogwild.sklearn import EXCLUDED_OPTIONS, HogwildClassifier, HogwildRegressor

# The estimators hand the trainer float32, C-ordered rows and sorted CSR columns:
# the library never has to copy or convert (it would say so with this warning).
pytestmark = pytest.mark.filterwarnings("error::hogwild.ConversionWarning")

# Serial: deterministic, every check applies. Hogwild with two racing workers (the
# estimators' defaults, so their ids read "HogwildClassifier()"): the checks that
# compare two fits are xfail (the estimators' _xfail_checks tag says why).
ESTIMATORS = [
    HogwildClassifier(mode="serial"),
    HogwildRegressor(mode="serial"),
    HogwildClassifier(mode="hogwild", workers=2),
    HogwildRegressor(mode="hogwild", workers=2),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_conformance(estimator, check):
    check(estimator)


def test_every_option_but_the_excluded_is_a_parameter():
    names = {o["name"] for o in hogwild.options()}
    for cls in (HogwildClassifier, HogwildRegressor):
        sig = inspect.signature(cls)
        assert all(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values())
        assert set(sig.parameters) == names - EXCLUDED_OPTIONS
        assert set(cls().get_params()) == names - EXCLUDED_OPTIONS
    assert EXCLUDED_OPTIONS <= names  # no stale exclusion


@pytest.fixture(scope="module")
def classification():
    X, y = make_classification(n_samples=1200, n_features=20, n_informative=5, class_sep=2.0,
                               random_state=0)
    return train_test_split(X, y, test_size=0.25, random_state=0)


def test_grid_search_in_a_pipeline_and_cross_val_score(classification):
    X, Xt, y, yt = classification
    pipe = make_pipeline(StandardScaler(), HogwildClassifier(workers=2))
    grid = GridSearchCV(pipe, {"hogwildclassifier__lr": [0.01, 0.1, 1.0]}, cv=3)
    grid.fit(X, y)
    assert len(grid.cv_results_["mean_test_score"]) == 3
    assert grid.best_score_ > 0.88
    # scikit-learn's own LogisticRegression gets 0.95 on the held-out quarter.
    reference = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y).score(Xt, yt)
    assert grid.score(Xt, yt) > max(0.88, reference - 0.05)
    # A fitted search survives pickling (the model file's bytes travel, not a native object).
    again = pickle.loads(pickle.dumps(grid))
    np.testing.assert_array_equal(again.predict(Xt), grid.predict(Xt))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.85


def test_string_classes_sparse_rows_and_probabilities():
    X, y = make_classification(n_samples=600, n_features=30, n_informative=8, n_classes=3,
                               n_clusters_per_class=1, random_state=1)
    names = np.array(["cat", "dog", "emu"])[y]
    Xs = sp.csr_matrix(StandardScaler().fit_transform(X))
    clf = HogwildClassifier(workers=2, epochs=10).fit(Xs, names)
    assert list(clf.classes_) == ["cat", "dog", "emu"]
    assert clf.model_.model == "softmax"
    p = clf.predict_proba(Xs)
    assert p.shape == (600, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_array_equal(clf.predict(Xs), clf.classes_[p.argmax(axis=1)])
    assert clf.score(Xs, names) > 0.8


def test_binary_models_and_decision_function():
    X, y = make_classification(n_samples=400, n_features=10, random_state=2)
    X = StandardScaler().fit_transform(X)
    labels = np.where(y == 1, "yes", "no")
    for model in ("logistic", "hinge", "squared"):
        clf = HogwildClassifier(mode="serial", model=model, lr=0.01).fit(X, labels)
        d = clf.decision_function(X)
        assert d.shape == (400,)
        np.testing.assert_array_equal(clf.predict(X), np.where(d > 0, "yes", "no"))
        assert clf.score(X, labels) > 0.8, model
        assert hasattr(clf, "predict_proba") == (model == "logistic")


def test_a_binary_model_refuses_more_classes():
    """model="squared" on three classes trained a regression on their codes and never
    predicted the third class (hinge was refused by the trainer; squared was not)."""
    X, y = make_classification(n_samples=300, n_features=10, n_informative=5, n_classes=3, random_state=3)
    for model in ("squared", "hinge"):
        with pytest.raises(ValueError, match=f"model='{model}' is binary, but y has 3 classes"):
            HogwildClassifier(mode="serial", model=model).fit(X, y)


def test_one_class_and_bad_options_are_value_errors():
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="class"):
        HogwildClassifier().fit(X, np.ones(20))
    with pytest.raises(ValueError, match="lr"):
        HogwildClassifier(lr=-1.0).fit(X, np.arange(20) % 2)
    with pytest.raises(hogwild.InputError):
        HogwildClassifier(mode="no-such-mode").fit(X, np.arange(20) % 2)
    with pytest.raises(ValueError, match="mf"):
        HogwildClassifier(model="mf").fit(X, np.arange(20) % 2)
    with pytest.raises(ValueError, match="classifier"):
        HogwildRegressor(model="logistic").fit(X, X[:, 0])


def test_regressor_fits_real_two_valued_and_constant_targets():
    X, y = make_regression(n_samples=500, n_features=8, noise=5.0, random_state=3)
    reg = HogwildRegressor(workers=2).fit(X, y)
    assert reg.score(X, y) > 0.95
    # Two values: the trainer regresses on -1/+1; predictions come back on y's scale.
    y2 = np.where(X[:, 0] > 0, 10.0, 4.0)
    reg2 = HogwildRegressor(mode="serial").fit(X, y2)
    assert abs(reg2.predict(X).mean() - y2.mean()) < 0.5
    assert reg2.score(X, y2) > 0.5
    constant = HogwildRegressor(mode="serial").fit(X, np.full(500, 7.5))
    np.testing.assert_allclose(constant.predict(X), 7.5)


def test_pickle_drops_the_native_model_and_rebuilds_it(monkeypatch):
    X, y = make_classification(n_samples=200, n_features=5, random_state=4)
    clf = HogwildClassifier(mode="serial").fit(X, y)
    before = clf.predict_proba(X)
    assert "_model_cache" in vars(clf)
    state = clf.__getstate__()
    assert "_model_cache" not in state and isinstance(state["model_file_"], bytes)
    assert "_model_cache" in vars(clf)  # pickling left the original alone
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(X), before)
    refit = clone(clf).fit(X, y)
    np.testing.assert_array_equal(refit.predict_proba(X), before)
    # Without memfd the model is rebuilt through a temporary file.
    monkeypatch.delattr(os, "memfd_create")
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(X), before)
    # A failed refit leaves the fitted state as it was.
    with pytest.raises(ValueError):
        clf.set_params(lr=-1.0).fit(X, np.where(y == 1, "b", "a"))
    assert list(clf.classes_) == [0, 1]
    np.testing.assert_array_equal(clf.predict_proba(X), before)
    assert not [f for f in os.listdir(tempfile.gettempdir()) if f.startswith("hogwild-sklearn-")]
