#!/usr/bin/python3
"""A model file read with numpy alone reproduces hogwild_predict.

For logistic, softmax and matrix factorisation: train with hogwild_train
--save-model, predict with hogwild_predict --probabilities (or the ratings), then
parse the safetensors file here (8 bytes of header length, the JSON header,
np.frombuffer per tensor) and compute the same predictions from the weights and
the data file. Usage: check_numpy.py BUILD_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

BUILD = sys.argv[1]
TRAIN = os.path.join(BUILD, "src", "hogwild_train")
PREDICT = os.path.join(BUILD, "src", "hogwild_predict")
DATA = os.path.join(BUILD, "src", "hogwild_data")
DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__")
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = np.frombuffer(blob[base + begin:base + end],
                                      dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return meta, tensors


def read_libsvm(path, features):
    labels, rows = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            labels.append(float(parts[0]))
            x = np.zeros(features, dtype=np.float64)
            for item in parts[1:]:
                i, v = item.split(":")
                if int(i) <= features:
                    x[int(i) - 1] = float(v)
            rows.append(x)
    return np.array(labels), np.array(rows)


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{args[0]} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def predicted(path):
    with open(path) as f:
        lines = [l.split() for l in f if l.strip()]
    return lines


def check_close(what, ours, theirs, tol):
    err = np.max(np.abs(np.asarray(ours, dtype=np.float64) - theirs))
    print(f"{what}: {len(theirs)} values, largest difference {err:.3g}")
    if not err <= tol:
        sys.exit(f"FAIL {what}: numpy's predictions differ from hogwild_predict's by {err}")


def logistic(tmp):
    train, test = os.path.join(tmp, "b.svm"), os.path.join(tmp, "b.test.svm")
    run(DATA, "generate", "--rows", "3000", "--features", "200", "--nnz-per-row", "12",
        "--seed", "3", "--out", train, "--test-out", test, "--test-rows", "500")
    model, out = os.path.join(tmp, "b.safetensors"), os.path.join(tmp, "b.pred")
    run(TRAIN, "--model", "logistic", "--mode", "hogwild", "--workers", "2", "--epochs", "3",
        "--train", train, "--save-model", model, "--quiet")
    summary = os.path.join(tmp, "b.json")
    run(PREDICT, "--model", model, "--data", test, "--probabilities", "--output", out, "--quiet",
        "--summary", summary)
    meta, t = read_safetensors(model)
    assert meta["model"] == "logistic" and meta["output"] == "probabilities", meta
    y, X = read_libsvm(test, int(meta["features"]))
    z = X @ t["w"].astype(np.float64) + t["b"][0]
    p = 1 / (1 + np.exp(-z))
    lines = predicted(out)
    assert lines[0] == ["labels", "0", "1"], lines[0]
    rows = np.array([[float(v) for v in l] for l in lines[1:]])
    check_close("logistic P(1)", rows[:, 2], p, 2e-5)
    labels = (z > 0).astype(float)
    mismatched = int(np.sum(rows[:, 0] != labels))
    if mismatched:
        sys.exit(f"FAIL logistic: {mismatched} labels differ")
    # The metrics from the same numbers: accuracy, log loss, and the AUC as the
    # Mann-Whitney statistic (ties counted half), computed here pair by pair.
    with open(summary) as f:
        m = json.load(f)
    pos, neg = p[y > 0], p[y <= 0]
    auc = (np.sum(pos[:, None] > neg[None, :]) + 0.5 * np.sum(pos[:, None] == neg[None, :])) / (len(pos) * len(neg))
    check_close("logistic AUC", [m["auc"]], np.array([auc]), 1e-4)
    check_close("logistic accuracy", [m["accuracy"]], np.array([np.mean(labels == y)]), 1e-12)
    logloss = -np.mean(np.where(y > 0, np.log(p), np.log(1 - p)))
    check_close("logistic log loss", [m["log_loss"]], np.array([logloss]), 1e-4)


def softmax(tmp):
    rng = np.random.default_rng(7)
    d, k = 30, 4
    centers = rng.normal(size=(k, d)) * 2
    def write(path, n):
        with open(path, "w") as f:
            for _ in range(n):
                c = rng.integers(k)
                x = centers[c] + rng.normal(size=d)
                f.write(f"{c + 1} " + " ".join(f"{j + 1}:{x[j]:.4f}" for j in range(d)) + "\n")
    train, test = os.path.join(tmp, "m.svm"), os.path.join(tmp, "m.test.svm")
    write(train, 2000)
    write(test, 400)
    model, out = os.path.join(tmp, "m.safetensors"), os.path.join(tmp, "m.pred")
    run(TRAIN, "--model", "softmax", "--mode", "hogwild", "--workers", "2", "--epochs", "2",
        "--lr", "0.05", "--train", train, "--save-model", model, "--quiet")
    run(PREDICT, "--model", model, "--data", test, "--probabilities", "--output", out, "--quiet")
    meta, t = read_safetensors(model)
    y, X = read_libsvm(test, int(meta["features"]))
    W = t["W"][:, :int(meta["features"])].astype(np.float64)
    z = X @ W.T + t["b"]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    classes = json.loads(meta["label_values"])
    lines = predicted(out)
    assert [float(v) for v in lines[0][1:]] == classes, lines[0]
    rows = np.array([[float(v) for v in l] for l in lines[1:]])
    check_close("softmax probabilities", rows[:, 1:], p, 2e-5)
    labels = np.array(classes)[np.argmax(z, axis=1)]
    if int(np.sum(rows[:, 0] != labels)):
        sys.exit("FAIL softmax: labels differ")


def mf(tmp):
    train, test = os.path.join(tmp, "r.tsv"), os.path.join(tmp, "r.test.tsv")
    run(DATA, "generate", "--kind", "ratings", "--users", "300", "--items", "200", "--rank", "4",
        "--ratings", "20000", "--test-ratings", "2000", "--seed", "5", "--out", train,
        "--test-out", test)
    model, out = os.path.join(tmp, "r.safetensors"), os.path.join(tmp, "r.pred")
    run(TRAIN, "--model", "mf", "--rank", "4", "--mode", "hogwild", "--workers", "2",
        "--epochs", "3", "--lr", "0.02", "--train", train, "--save-model", model, "--quiet")
    run(PREDICT, "--model", model, "--data", test, "--output", out, "--quiet")
    meta, t = read_safetensors(model)
    triples = np.loadtxt(test)
    u, i = triples[:, 0].astype(int), triples[:, 1].astype(int)
    P, Q = t["P"].astype(np.float64), t["Q"].astype(np.float64)
    known = (u < P.shape[0]) & (i < Q.shape[0])
    r = float(meta["target_mean"]) + np.where(known, np.einsum("ij,ij->i", P[np.minimum(u, P.shape[0] - 1)], Q[np.minimum(i, Q.shape[0] - 1)]), 0)
    r += np.where(u < len(t["bu"]), t["bu"][np.minimum(u, len(t["bu"]) - 1)], 0)
    r += np.where(i < len(t["bi"]), t["bi"][np.minimum(i, len(t["bi"]) - 1)], 0)
    ours = np.array([float(l[0]) for l in predicted(out)])
    check_close("mf ratings", ours, r, 2e-5)


with tempfile.TemporaryDirectory() as tmp:
    logistic(tmp)
    softmax(tmp)
    mf(tmp)
print("ok")
