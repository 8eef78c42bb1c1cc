"""`import hogwild`: training from paths and arrays, the options, the errors, signals,
the GIL, leaks, the predictor and the statistics, against the real trainer (forked
workers, shared memory) and the real command-line tools."""
import gzip
import json
import os
import queue
import signal
import subprocess
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

import hogwild

SHARED = os.environ.get("HOGWILD_SHARED_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))
SPAM_TRAIN = os.path.join(SHARED, "spamassassin", "spam.train.svm.gz")
SPAM_TEST = os.path.join(SHARED, "spamassassin", "spam.test.svm.gz")
FASHION = "/usr/share/datasets/fashion-mnist"
PREDICT = os.environ.get("HOGWILD_PREDICT", "hogwild_predict")
TRAIN = os.environ.get("HOGWILD_TRAIN", "hogwild_train")
DATA_TOOL = os.environ.get("HOGWILD_DATA", "hogwild_data")


@pytest.fixture(scope="module")
def spam():
    if not os.path.exists(SPAM_TRAIN):
        pytest.skip(f"{SPAM_TRAIN}: the shared SpamAssassin data is not here")
    X, y = load_svmlight_file(SPAM_TRAIN, zero_based=False, dtype=np.float32)
    Xt, yt = load_svmlight_file(SPAM_TEST, zero_based=False, dtype=np.float32, n_features=X.shape[1])
    return X, y, Xt, yt


def problem(rows=4000, cols=500, seed=1):
    """A sparse binary problem with a planted linear model."""
    rng = np.random.default_rng(seed)
    X = sp.random(rows, cols, density=0.02, format="csr", dtype=np.float32, random_state=seed)
    w = rng.normal(size=cols).astype(np.float32)
    return X, (X @ w > 0).astype(np.float32)


def our_shm():
    return {n for n in os.listdir("/dev/shm") if n.startswith("hogwild")}


def children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += [int(c) for c in f.read().split()]
    return out


def zombies_of(pid):
    dead = []
    for c in children(pid):
        try:
            with open(f"/proc/{c}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    dead.append(c)
        except FileNotFoundError:
            pass
    return dead


# --- data in --------------------------------------------------------------------

def test_path_and_arrays_give_identical_weights(spam):
    X, y, _, _ = spam
    opts = dict(model="logistic", mode="serial", epochs=2, lr=0.5, seed=3)
    from_path = hogwild.train(SPAM_TRAIN, **opts)
    from_csr = hogwild.train((X, y), **opts)
    wide = sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)), shape=X.shape)
    from_csr64 = hogwild.train((wide, y), **opts)
    assert from_path.weights["w"].shape == from_csr.weights["w"].shape
    np.testing.assert_array_equal(from_path.weights["w"], from_csr.weights["w"])
    np.testing.assert_array_equal(from_path.weights["b"], from_csr.weights["b"])
    np.testing.assert_array_equal(from_csr.weights["w"], from_csr64.weights["w"])
    assert from_path.summary["samples"] == from_csr.summary["samples"] == 2 * X.shape[0]


def safetensors_sha256(path):
    """The summary's weights_sha256, computed here from a model file's tensors: the
    definition (tensors by ascending name; name, a zero byte, the count as a u64,
    the float32 values; all little-endian), written again independently."""
    import hashlib
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    h = hashlib.sha256()
    for name in sorted((k for k in header if k != "__metadata__"), key=str.encode):
        t = header[name]
        assert t["dtype"] == "F32"
        begin, end = t["data_offsets"]
        h.update(name.encode() + b"\0")
        h.update(((end - begin) // 4).to_bytes(8, "little"))
        h.update(raw[8 + n + begin:8 + n + end])
    return h.hexdigest()


def test_weights_sha256_is_the_clis_and_the_model_files(spam, tmp_path):
    X, y, _, _ = spam
    summary, model = tmp_path / "s.json", tmp_path / "m.safetensors"
    subprocess.run([TRAIN, "--train", SPAM_TRAIN, "--model", "logistic", "--mode", "serial",
                    "--epochs", "2", "--lr", "0.5", "--seed", "3", "--digest", "--summary", str(summary),
                    "--save-model", str(model), "-q"], check=True, capture_output=True)
    cli = json.loads(summary.read_text())["weights_sha256"]
    assert len(cli) == 64
    assert safetensors_sha256(model) == cli
    r = hogwild.train((X, y), model="logistic", mode="serial", epochs=2, lr=0.5, seed=3)
    assert "weights_sha256" not in r.summary  # not asked for: not paid for
    assert r.weights_sha256 == cli
    other = hogwild.train((X, y), model="logistic", mode="serial", epochs=2, lr=0.5, seed=4,
                          digest=True)
    assert other.weights_sha256 != cli
    assert other.summary["weights_sha256"] == other.weights_sha256


def test_dense_floats_and_csr_of_the_same_rows_agree():
    X, y = problem(2000, 100)
    opts = dict(model="logistic", mode="serial", epochs=2, lr=0.2, storage="sparse")
    a = hogwild.train((X, y), **opts)
    b = hogwild.train((X.toarray(), y), **opts)
    np.testing.assert_allclose(a.weights["w"], b.weights["w"], rtol=1e-5, atol=1e-6)


def test_spam_two_hogwild_workers_from_csr(spam):
    X, y, Xt, yt = spam
    r = hogwild.train((X, y), test=(Xt, yt), model="logistic", mode="hogwild", workers=2,
                      epochs=10, lr=0.5, lr_decay=0.9)
    assert r.summary["test_accuracy"] >= 0.96
    assert len(r.metrics) == 10 and r.metrics[-1]["epoch"] == 10
    assert r.summary["workers"] == 2


def fashion(kind, rows):
    with gzip.open(f"{FASHION}/{kind}-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 784)[:rows]
    with gzip.open(f"{FASHION}/{kind}-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8, offset=8)[:rows]
    return images, labels


def test_fashion_mnist_dense_softmax():
    if not os.path.exists(FASHION):
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    X, y = fashion("train", 60000)
    Xt, yt = fashion("t10k", 10000)
    # uint8 rows read as byte / 255, as the IDX files' pixels do.
    r = hogwild.train((X, y), test=(Xt, yt), model="softmax", workers=2, epochs=8, batch=8,
                      lr=0.05, lr_decay=0.7)  # 0.845-0.846 in 3 runs; lr_decay 0.9: 0.819-0.836
    assert r.summary["test_accuracy"] >= 0.83
    assert r.weights["W"].shape[0] == 10


def test_ratings_arrays_train_mf():
    rng = np.random.default_rng(2)
    users, items = rng.integers(0, 200, 20000), rng.integers(0, 300, 20000)
    u, v = rng.normal(size=(200, 4)), rng.normal(size=(300, 4))
    ratings = (np.einsum("ij,ij->i", u[users], v[items]) + 3).astype(np.float32)
    r = hogwild.train((users, items, ratings), test=(users[:2000], items[:2000], ratings[:2000]),
                      model="mf", workers=2, epochs=20, lr=0.02, rank=4)
    first, last = r.metrics[0]["test_rmse"], r.metrics[-1]["test_rmse"]
    assert last < 0.7 * first


def test_conversions_are_said():
    X, y = problem(500, 50)
    with pytest.warns(hogwild.ConversionWarning, match="float64"):
        hogwild.train((X.astype(np.float64), y), mode="serial", epochs=1)
    with pytest.warns(hogwild.ConversionWarning, match="float64"):
        hogwild.train((X.toarray().astype(np.float64), y), mode="serial", epochs=1)
    unsorted = X.copy()
    unsorted.has_sorted_indices = False
    unsorted.indices[unsorted.indptr[0]:unsorted.indptr[1]] = unsorted.indices[unsorted.indptr[0]:unsorted.indptr[1]][::-1]
    with pytest.warns(hogwild.ConversionWarning, match="sorted"):
        hogwild.train((unsorted, y), mode="serial", epochs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float32 CSR with int32 indices: read in place, no warning
        hogwild.train((X, y), mode="serial", epochs=1)


# --- errors ---------------------------------------------------------------------

def test_error_classes_match_the_exit_classes():
    assert issubclass(hogwild.DataError, hogwild.InputError)
    assert issubclass(hogwild.ConfigError, hogwild.InputError)
    assert issubclass(hogwild.InputError, hogwild.Error) and issubclass(hogwild.InputError, ValueError)
    assert (hogwild.InputError.exit_code, hogwild.WorkerError.exit_code,
            hogwild.ResourceError.exit_code, hogwild.Interrupted.exit_code) == (2, 3, 4, 130)
    assert issubclass(hogwild.Interrupted, KeyboardInterrupt)


def test_bad_values_name_the_row():
    X, y = problem(300, 40)
    bad = X.copy()
    row = next(r for r in range(7, 300) if bad.indptr[r + 1] > bad.indptr[r])
    bad.data[bad.indptr[row]] = np.nan
    with pytest.raises(hogwild.DataError, match=rf"train: row {row}: .*not a finite"):
        hogwild.train((bad, y), mode="serial", epochs=1)
    dense = X.toarray()
    dense[12, 3] = np.inf
    with pytest.raises(hogwild.DataError, match=r"train: row 12: the value at column 3"):
        hogwild.train((dense, y), mode="serial", epochs=1)
    labels = y.copy()
    labels[5] = np.nan
    with pytest.raises(hogwild.DataError, match=r"row 5: the label"):
        hogwild.train((X, labels), mode="serial", epochs=1)
    dup = sp.csr_matrix((np.ones(2, np.float32), np.array([3, 3], np.int32), np.array([0, 2, 2], np.int32)),
                        shape=(2, 5))
    dup.has_sorted_indices = True
    with pytest.raises(hogwild.DataError, match=r"row 0: column 3 is stored twice"):
        hogwild.train((dup, np.array([0, 1], np.float32)), mode="serial", epochs=1)
    with pytest.raises(hogwild.DataError, match="labels must be numbers"):
        hogwild.train((X, np.array(["a"] * 300)), mode="serial", epochs=1)


def test_malformed_file_names_file_and_line(tmp_path):
    path = tmp_path / "bad.svm"
    path.write_text("1 1:0.5 2:1\n0 3:oops\n")
    with pytest.raises(hogwild.DataError, match=r"bad.svm:2:") as e:
        hogwild.train(str(path), mode="serial", epochs=1)
    assert e.value.line == 2 and e.value.file.endswith("bad.svm")


def test_options_are_the_command_lines():
    X, y = problem(300, 40)
    with pytest.raises(hogwild.ConfigError, match="--lr"):
        hogwild.train((X, y), lr=-1)
    with pytest.raises(hogwild.ConfigError, match="no option lr_schedul"):
        hogwild.train((X, y), lr_schedul="x")
    with pytest.raises(hogwild.ConfigError, match="unknown mode"):
        hogwild.train((X, y), mode="nonesuch")
    with pytest.raises(hogwild.ConfigError, match="more than the 300 training rows"):
        hogwild.train((X, y), workers=301)
    names = {o["name"] for o in hogwild.options()}
    assert {"lr", "lr_decay", "workers", "merge_every", "save_model"} <= names
    r = hogwild.train((X, y), mode="hogwild", workers=2, epochs=2, lr=0.25, batch=4, seed=9)
    assert r.summary["options"]["lr"] == "0.25" and r.summary["options"]["batch"] == "4"


def test_missing_file_and_full_disk():
    with pytest.raises(hogwild.IoError, match="nonesuch"):
        hogwild.train("/nonesuch/train.svm")
    X, y = problem(300, 40)
    with pytest.raises(hogwild.ResourceError):
        hogwild.train((X, y), mode="serial", epochs=1, summary="/dev/full")


def test_a_dead_worker_is_a_worker_error():
    X, y = problem(20000, 200)
    server = hogwild.fork_server_pid

    def kill_workers(record):
        # (Called again for a record the parent had before it saw the first death:
        # a worker it killed meanwhile may be gone between the listing and the kill.)
        for pid in children(server):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    before = our_shm()
    with pytest.raises(hogwild.WorkerError, match="killed by signal 9"):
        hogwild.train((X, y), workers=2, epochs=200, max_restarts=0, on_epoch=kill_workers)
    assert our_shm() <= before


# --- control: callbacks, Ctrl-C, the GIL, leaks ----------------------------------

def test_on_epoch_gets_each_record_and_its_exception_stops_the_run():
    X, y = problem(3000, 100)
    seen = []
    r = hogwild.train((X, y), test=(X, y), workers=2, epochs=4, on_epoch=seen.append)
    assert [s["epoch"] for s in seen] == [1, 2, 3, 4] and seen == r.metrics
    assert all("test_loss" in s for s in seen)

    class Enough(Exception):
        pass

    def stop(record):
        if record["epoch"] >= 2:
            raise Enough(record["epoch"])

    before = our_shm()
    t0 = time.time()
    with pytest.raises(Enough):
        hogwild.train((X, y), workers=2, epochs=100000, on_epoch=stop)
    assert time.time() - t0 < 30
    assert our_shm() <= before and not zombies_of(os.getpid())


def test_ctrl_c_stops_the_run_and_raises_keyboard_interrupt(tmp_path):
    X, y = problem(20000, 200)
    model = tmp_path / "m.safetensors"
    python_handler = signal.getsignal(signal.SIGINT)
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    t0 = time.time()
    with pytest.raises(KeyboardInterrupt) as e:
        hogwild.train((X, y), workers=2, epochs=100000, save_model=str(model))
    assert time.time() - t0 < 20
    assert isinstance(e.value, hogwild.Interrupted) and e.value.exit_code == 130
    assert e.value.result.summary["interrupted"] == "SIGINT"
    assert e.value.result.weights["w"].shape == (200,)
    assert hogwild.load_model(model).model == "logistic"  # the model at the stop, written whole
    assert signal.getsignal(signal.SIGINT) is python_handler  # Python's handler is back
    # And the next run trains as usual.
    assert hogwild.train((X, y), workers=2, epochs=1).summary["samples"] == 20000


def test_the_gil_is_released_while_training():
    X, y = problem(40000, 500)
    # Long enough a run that the other thread's count means something: twice the
    # epochs until it trains for more than 0.2 s (30 epochs take 0.14-0.4 s on the
    # machines this ran on).
    epochs = 30
    while True:
        count, done = [0], threading.Event()

        def counter():
            while not done.is_set():
                count[0] += 1

        t = threading.Thread(target=counter)
        t.start()
        try:
            start = count[0]
            r = hogwild.train((X, y), workers=2, epochs=epochs)
            during = count[0] - start
        finally:
            done.set()
            t.join()
        if r.summary["train_seconds"] > 0.2 or epochs >= 480:
            break
        epochs *= 2
    assert r.summary["train_seconds"] > 0.2
    assert during > 10000, f"the other thread counted {during} while training"


def test_twenty_runs_leave_nothing_behind():
    X, y = problem(2000, 100)
    before = our_shm()
    server = hogwild.fork_server_pid
    for i in range(20):
        hogwild.train((X, y), test=(X, y), mode=["hogwild", "lock", "ddp", "atomic"][i % 4],
                      workers=2, epochs=2)
    assert our_shm() <= before
    assert children(os.getpid()) == [server]  # the fork server alone, no zombie
    assert children(server) == []             # and it holds no worker
    assert hogwild.fork_server_pid == server


def test_the_fork_server_is_a_small_program_of_its_own():
    """The server is exec'd at import (hogwild-fork-server, beside the extension): the
    workers are forks of a small program, not of a copy of this interpreter with numpy
    and scipy loaded, whose fork, exit and memory reading cost each run 10 ms more."""
    server = hogwild.fork_server_pid
    exe = os.readlink(f"/proc/{server}/exe")
    assert os.path.basename(exe) == "hogwild-fork-server"
    assert os.path.dirname(exe) == os.path.dirname(os.path.realpath(hogwild._hogwild.__file__))

    def rss_kib(pid):
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    assert rss_kib(server) * 4 < rss_kib(os.getpid())
    X, y = problem(2000, 100)
    assert hogwild.train((X, y), workers=2, epochs=1).summary["samples"] == 2000


def test_the_arena_kept_for_the_next_run_is_released_on_request():
    def shmem_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("RssShmem:"))
    # A 16 MiB model: its arena is kept after the run.
    rng = np.random.default_rng(1)
    X = sp.csr_matrix((np.ones(16000, np.float32), rng.integers(0, 1 << 22, 16000).astype(np.int32),
                       np.arange(0, 16001, 8)), shape=(2000, 1 << 22))
    X.sum_duplicates()
    y = (np.arange(2000) % 2).astype(np.float32)
    hogwild.train((X, y), workers=2, epochs=1)
    kept = shmem_kib()
    hogwild.release_arena()
    assert shmem_kib() < kept - 15 * 1024


# --- predicting and statistics ------------------------------------------------------

def test_predictor_agrees_with_hogwild_predict(spam, tmp_path):
    X, y, Xt, yt = spam
    model = tmp_path / "spam.safetensors"
    hogwild.train((X, y), workers=2, epochs=3, lr=0.5, save_model=str(model))
    m = hogwild.load_model(model)
    labels = m.predict(Xt)
    proba = m.predict_proba(Xt)
    out = subprocess.run([PREDICT, "--model", str(model), "--data", SPAM_TEST, "--probabilities", "-q"],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    rows = [line.split() for line in out if line.strip() and not line.startswith("labels")]
    assert len(rows) == Xt.shape[0]
    np.testing.assert_array_equal(labels, np.array([float(r[0]) for r in rows], np.float32))
    np.testing.assert_allclose(proba, np.array([[float(v) for v in r[1:]] for r in rows]), atol=1e-6)
    assert np.allclose(proba.sum(axis=1), 1, atol=1e-5)
    e = m.evaluate((Xt, yt))
    assert e["accuracy"] == pytest.approx(np.mean(labels == yt))
    dense = m.predict(Xt[:50].toarray())
    np.testing.assert_array_equal(dense, labels[:50])


def test_stats_are_hogwild_datas(spam, tmp_path):
    X, y, _, _ = spam
    s = hogwild.stats((X, y), model="logistic")
    out = tmp_path / "stats.json"
    subprocess.run([DATA_TOOL, "stats", "--train", SPAM_TRAIN, "--model", "logistic", "--json", str(out)],
                   check=True, capture_output=True)
    cli = json.loads(out.read_text())
    for key in ("updates", "omega", "delta", "coordinates", "rho_lower", "rho_upper", "kappa"):
        assert s[key] == pytest.approx(cli[key]), key
    assert hogwild.stats(X, model="logistic")["omega"] == s["omega"]  # rows alone, as the README has it
    assert [v["tau"] for v in s["theory"]] == [1, 2, 4, 8, 16]


def test_forking_after_threads(tmp_path):
    """As in a Jupyter kernel: numpy (a BLAS pool) and the caller's threads exist before
    `import hogwild`; the workers, forked by the server, still train."""
    script = tmp_path / "threads_first.py"
    script.write_text(
        "import threading, time, numpy as np\n"
        "a = np.random.default_rng(0).random((300, 300)); a @ a  # the BLAS pool is up\n"
        "stop = threading.Event(); lock = threading.Lock()\n"
        "def busy():\n"
        "    while not stop.is_set():\n"
        "        with lock: time.sleep(0.0001)\n"
        "ts = [threading.Thread(target=busy) for _ in range(3)]; [t.start() for t in ts]\n"
        "import hogwild, scipy.sparse as sp\n"
        "X = sp.random(5000, 200, density=0.05, format='csr', dtype=np.float32, random_state=1)\n"
        "y = (X @ np.arange(200, dtype=np.float32) > 50).astype(np.float32)\n"
        "r = hogwild.train((X, y), test=(X, y), workers=2, epochs=3)\n"
        "stop.set(); [t.join() for t in ts]\n"
        "print(r.summary['test_accuracy'])\n")
    out = subprocess.run(["/usr/bin/python3", str(script)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip()) > 0.8


def test_one_run_at_a_time_through_the_fork_server():
    X, y = problem(20000, 200)
    running, done = threading.Event(), threading.Event()
    errors = []

    class Stop(Exception):
        pass

    def progress(record):
        running.set()
        if done.is_set():
            raise Stop()

    def background():
        try:
            hogwild.train((X, y), workers=2, epochs=100000, on_epoch=progress)
        except Stop:
            pass
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=background)
    t.start()
    try:
        assert running.wait(30)
        with pytest.raises(hogwild.ConfigError, match="serving another run"):
            hogwild.train((X, y), workers=2, epochs=1)
        # Serial runs in this process's own thread: allowed beside it.
        assert hogwild.train((X, y), mode="serial", epochs=1).summary["samples"] == 20000
    finally:
        done.set()
        t.join(60)
    assert not t.is_alive() and not errors


def test_the_issue_snippet(spam, tmp_path):
    """The page's first example, as a user types it: load_svmlight_file's float64 rows
    (converted once, with a warning), metrics=True, a saved model, stats of X alone."""
    X, y = load_svmlight_file(SPAM_TRAIN)  # float64, as sklearn loads by default
    Xt, yt = load_svmlight_file(SPAM_TEST, n_features=X.shape[1])
    model = str(tmp_path / "m.safetensors")
    with pytest.warns(hogwild.ConversionWarning, match="float64"):
        r = hogwild.train((X, y), test=(Xt, yt), model="logistic", mode="hogwild", workers=2,
                          epochs=10, lr=0.5, lr_decay=0.9, metrics=True, save_model=model)
    w = r.weights["w"]
    kept = w.copy()
    assert len(r.metrics) == 10 and r.summary["samples_per_second"] > 0
    assert r.summary["test_accuracy"] >= 0.96
    m = hogwild.load_model(model)
    assert np.mean(m.predict(Xt) == yt) == pytest.approx(r.summary["test_accuracy"], abs=1e-9)
    s = hogwild.stats(X, model="logistic")
    assert s["omega"] > 0 and 0 < s["delta"] <= 1
    # The weights are the result's own: another run (a new arena where the old one
    # was) leaves them as they were.
    hogwild.train((Xt, yt), model="logistic", workers=2, epochs=2, lr=5.0)
    np.testing.assert_array_equal(w, kept)


def test_a_dataset_is_checked_and_copied_once_for_many_runs():
    X, y = problem(3000, 100)
    d = hogwild.dataset((X, y))
    assert (d.rows, d.cols) == (3000, 100)
    serial = hogwild.train(d, mode="serial", epochs=2, seed=4).weights["w"]
    np.testing.assert_array_equal(serial, hogwild.train((X, y), mode="serial", epochs=2, seed=4).weights["w"])
    X.data[:] = 0  # the caller's arrays change; the data set was copied
    del X
    np.testing.assert_array_equal(serial, hogwild.train(d, mode="serial", epochs=2, seed=4).weights["w"])
    before = our_shm()
    for _ in range(3):  # the workers are handed the same memory file each run
        r = hogwild.train(d, test=d, workers=2, epochs=2)
        assert r.summary["samples"] == 6000 and r.summary["test_accuracy"] > 0.7
    assert our_shm() <= before


# --- what a red-team pass found ------------------------------------------------------

def run_script(tmp_path, text, timeout=120):
    script = tmp_path / "case.py"
    script.write_text(text)
    return subprocess.run(["/usr/bin/python3", str(script)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


PROBLEM = ("import numpy as np, scipy.sparse as sp, hogwild\n"
           "X = sp.random(8000, 200, density=0.05, format='csr', dtype=np.float32, random_state=1)\n"
           "y = (X @ np.arange(200, dtype=np.float32) > 50).astype(np.float32)\n")


def test_processes_forked_after_import_train_through_their_own_server(tmp_path):
    """multiprocessing's fork: each child once asked the importer's server on its
    socket, read the other's replies and waited for ever."""
    out = run_script(tmp_path, PROBLEM +
                     "import multiprocessing as mp, os\n"
                     "def job(i):\n"
                     "    r = hogwild.train((X, y), workers=2, epochs=2)\n"
                     "    return r.summary['samples'], hogwild.fork_server_pid != SERVER\n"
                     "SERVER = hogwild.fork_server_pid\n"
                     "with mp.get_context('fork').Pool(2) as p:\n"
                     "    print(p.map(job, range(4)))\n"
                     "print(hogwild.train((X, y), workers=2, epochs=1).summary['samples'])\n", timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[(16000, True), (16000, True), (16000, True), (16000, True)]", "8000"]


def test_ctrl_c_is_not_queued_behind_a_slow_callback(tmp_path):
    out = run_script(tmp_path, PROBLEM +
                     "import os, signal, threading, time\n"
                     "threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
                     "t = time.time()\n"
                     "try:\n"
                     "    hogwild.train((X, y), workers=2, epochs=30, on_epoch=lambda r: time.sleep(0.5))\n"
                     "except KeyboardInterrupt:\n"
                     "    print(round(time.time() - t))\n")
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) <= 8  # not the 15 s of every epoch's callback


def test_interpreter_exit_while_a_daemon_thread_trains(tmp_path):
    out = run_script(tmp_path, PROBLEM +
                     "import threading, time\n"
                     "threading.Thread(target=lambda: hogwild.train((X, y), epochs=100000,\n"
                     "                 on_epoch=lambda r: None), daemon=True).start()\n"
                     "time.sleep(0.5)\n")
    assert out.returncode == 0, out.stderr  # was: "terminate called", abort


def test_indptr_going_backwards_is_a_data_error():
    C = sp.random(50, 20, density=.3, format="csr", dtype=np.float32, random_state=1)
    p = C.indptr.copy()
    p[5] = 10**7  # scipy's own sort read past the arrays of this matrix
    with pytest.raises(hogwild.DataError, match="row 5: indptr goes backwards"):
        hogwild.train((sp.csr_matrix((C.data, C.indices, p), shape=C.shape), np.arange(50) % 2), epochs=1)


def test_widths_and_argument_checks():
    X, y = problem(300, 40)
    D = X.toarray()
    with pytest.raises(hogwild.ConfigError, match="test: rows of 20 columns for training rows of 40"):
        hogwild.train((D, y), test=(D[:, :20], y), epochs=1)
    with pytest.raises(hogwild.ConfigError, match="tau"):
        hogwild.stats(X, tau=[-1])
    with pytest.raises(hogwild.ConfigError, match="classes"):
        hogwild.stats(X, classes=-1)
    with pytest.raises(hogwild.DataError, match="row 0: the label 1e.300 does not fit a float32"):
        hogwild.train((X, np.full(300, 1e300)), epochs=1)
    r = hogwild.train((D, y), model="mlp", hidden=np.array([8, 4]), epochs=1, mode="serial")
    assert r.weights["W1"].shape == (8, 40)


def test_outputs_are_checked_as_the_cli_checks_them(tmp_path):
    """save_model= over the data file replaced the training set, outputs on one path
    overwrote each other, and a summary in no folder failed after the training."""
    X, y = problem(300, 40)
    data = tmp_path / "data.svm"
    with open(data, "w") as f:
        for row, label in zip(X.toarray(), y):
            f.write(f"{int(label)} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(row) if v) + "\n")
    before = data.read_bytes()
    with pytest.raises(hogwild.ConfigError, match="save_model .*data.svm is the data file"):
        hogwild.train(str(data), mode="serial", epochs=1, save_model=str(data))
    assert data.read_bytes() == before
    with pytest.raises(hogwild.ConfigError, match="is also the summary file"):
        hogwild.train((X, y), mode="serial", epochs=1, summary=str(tmp_path / "o"), save_model=str(tmp_path / "o"))
    with pytest.raises(hogwild.IoError, match="no directory"):
        hogwild.train((X, y), mode="serial", epochs=1, summary=str(tmp_path / "no" / "s.json"))
    assert sorted(os.listdir(tmp_path)) == ["data.svm"]
    # A run's outputs are its own while it runs, and free again once it has ended.
    for _ in range(2):
        hogwild.train(data, mode="serial", epochs=1, save_model=tmp_path / "m.st", summary=tmp_path / "s.json")
    assert (tmp_path / "m.st").exists() and json.loads((tmp_path / "s.json").read_text())["epochs"] == 1


def test_data_sets_paths_counts_and_devices_are_checked(tmp_path):
    """A dense data set of another width was predicted and evaluated silently, a
    path or a scalar given as rows was an IndexError, stats(pairs=0) ran, a numpy
    0-d array as an option was a TypeError, and /dev/zero was read until memory ran out."""
    X, y = problem(300, 40)
    D = X.toarray()
    hogwild.train((D, y), mode="serial", epochs=1, save_model=tmp_path / "m.st")
    m = hogwild.load_model(tmp_path / "m.st")
    wide = hogwild.dataset((np.hstack([D, D]), y))
    for call in (m.predict, m.evaluate):
        with pytest.raises(hogwild.ConfigError, match="rows of 80 columns for a model of 40 features"):
            call(wide)
    for train in (hogwild.dataset((D, y)), (X, y)):
        with pytest.raises(hogwild.ConfigError, match="test: rows of 20 columns for training rows of 40"):
            hogwild.train(train, test=(D[:, :20], y), mode="serial", epochs=1)
    for rows in ("x.svm", None, 3.0, D[0]):
        with pytest.raises(hogwild.ConfigError, match="X: rows"):
            m.predict(rows)
    with pytest.raises(hogwild.ConfigError, match="pairs: a whole number of 1 to 4294967294"):
        hogwild.stats(X, pairs=0)
    with pytest.raises(hogwild.ConfigError, match="seed: a whole number of 0 to"):
        hogwild.stats(X, seed=2**64)
    a, b = (hogwild.stats(X, seed=s, pairs=1000) for s in (np.int64(3), 3))
    assert {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}
    assert hogwild.train((D, y), mode="serial", epochs=1, lr=np.array(0.1)).summary["options"]["lr"] == "0.1"
    with pytest.raises(hogwild.ConfigError, match="summary: a path to write to, not True"):
        hogwild.train((D, y), mode="serial", epochs=1, summary=True)
    with pytest.raises(hogwild.ConfigError, match="a device, not a file or a pipe"):
        hogwild.load_model("/dev/zero")
    with pytest.raises(hogwild.ConfigError, match=r"threads: 0 \(all cores\) to 1024, not -1"):
        hogwild.dataset(str(tmp_path / "m.st"), threads=-1)
    # A finite float64 past a float's range was "not a finite number"; complex CSR
    # values trained on their real parts (dense ones were refused).
    big = D.astype(np.float64)
    big[3, 5] = 1e39
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(hogwild.DataError, match="row 3, column 5: the value 1e.39 does not fit a float32"):
            hogwild.train((big, y), mode="serial", epochs=1)
        with pytest.raises(hogwild.DataError, match="row 3, column 5: the value 1e.39 does not fit a float32"):
            hogwild.train((sp.csr_matrix(big), y), mode="serial", epochs=1)
        with pytest.raises(hogwild.DataError, match="values must be numbers, not complex64"):
            hogwild.train((sp.csr_matrix(D.astype(np.complex64)), y), mode="serial", epochs=1)


def test_ctrl_c_stops_stats():
    """stats() ran on past Ctrl-C (pairs=10**9: 80 s, two SIGINTs ignored), and
    pairs past 2^32 never ended (the pairs' 32-bit stamps wrapped)."""
    X, y = problem(2000, 50)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        hogwild.stats((X, y), pairs=2**32 - 2)
    assert time.monotonic() - t0 < 10
    timer.join()
    with pytest.raises(hogwild.ConfigError, match="pairs: a whole number of 1 to 4294967294"):
        hogwild.stats((X, y), pairs=2**32)


def test_in_a_jupyter_kernel():
    """A real ipykernel (Debian's python3-ipykernel): a run trains, the kernel's
    interrupt (SIGINT, as the notebook's stop button) raises Interrupted at once,
    the next run trains, nothing is left in /dev/shm."""
    manager = pytest.importorskip("jupyter_client.manager")
    pytest.importorskip("ipykernel")
    env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
    km = manager.KernelManager(kernel_name="python3")
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)

        def run(code, interrupt_after=None):
            msg_id = kc.execute(code)
            if interrupt_after is not None:
                time.sleep(interrupt_after)
                km.interrupt_kernel()
            out, errors = [], []
            idle = False
            while True:
                # ipykernel's output thread may send the last of stdout after the
                # idle status on a loaded machine: read on for a second after it.
                try:
                    m = kc.get_iopub_msg(timeout=1 if idle else 60)
                except queue.Empty:
                    return "".join(out), errors
                if m["parent_header"].get("msg_id") != msg_id:
                    continue
                if m["msg_type"] == "stream" and m["content"]["name"] == "stdout":
                    out.append(m["content"]["text"])
                if m["msg_type"] == "error":
                    errors.append(m["content"]["ename"])
                if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                    idle = True

        out, errors = run(PROBLEM + "r = hogwild.train((X, y), test=(X, y), workers=2, epochs=3)\n"
                                    "print(r.summary['test_accuracy'])\n")
        assert not errors and float(out) > 0.9
        t0 = time.time()
        out, errors = run("r = hogwild.train((X, y), workers=2, epochs=100000)", interrupt_after=1.5)
        assert errors == ["Interrupted"] and time.time() - t0 < 15
        out, errors = run("print(hogwild.train((X, y), workers=2, epochs=1).summary['samples'])\n"
                          "import os\nprint(len([n for n in os.listdir('/dev/shm') if n.startswith('hogwild')]))")
        assert not errors and out.split() == ["8000", "0"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
