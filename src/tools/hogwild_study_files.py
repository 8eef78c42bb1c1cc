"""What hogwild_sweep and hogwild_plot share: reading the files hogwild_train and
hogwild_sweep write (a summary, a metrics file, a sweep's sweep.json and
results.json), each refused with exit 2 naming the file, and its line, where it is
not what they write; and writing one whole or not at all."""
import hashlib
import json
import os
import sys


def fail(message):
    """Says what is wrong, as `TOOL: error: ...`, and exits 2."""
    print(f"{os.path.basename(sys.argv[0]).removesuffix('.py')}: error: {message}", file=sys.stderr)
    sys.exit(2)


def load_json(path, need=()):
    """The JSON object in `path`, or exit 2 naming the file and line where it is not
    JSON (a run killed while writing it, a file edited by hand), not UTF-8, not an
    object, or an object without the keys in `need`."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        fail(f"{path}: not UTF-8 text (byte {e.start}): not a file hogwild_train or hogwild_sweep wrote")
    except json.JSONDecodeError as e:
        fail(f"{path}:{e.lineno}: not JSON ({e.msg} at column {e.colno})")
    return checked(obj, need, path)


def checked(obj, need, where):
    """`obj` where it is a JSON object with the keys in `need`; else exit 2 naming `where`."""
    if not isinstance(obj, dict):
        fail(f"{where}: a JSON object is wanted, not {type(obj).__name__}: not a file hogwild_train "
             "or hogwild_sweep wrote")
    for key in need:
        if key not in obj:
            fail(f"{where}: no \"{key}\": not a file this version of hogwild_train or hogwild_sweep wrote")
    return obj


def load_jsonl(path, need=()):
    """The objects of a JSON-lines file (--metrics), the same way."""
    out = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                fail(f"{path}:{number}: not UTF-8 text (byte {e.start})")
            if line.strip():
                try:
                    out.append(checked(json.loads(line), need, f"{path}:{number}"))
                except json.JSONDecodeError as e:
                    fail(f"{path}:{number}: not JSON ({e.msg} at column {e.colno})")
    return out


def write_atomic(path, text):
    """`text` into `path` under a temporary name, then renamed into place: a kill or a
    full disk leaves the old file or the new one, never half of one."""
    part = f"{path}.tmp.{os.getpid()}"
    try:
        with open(part, "w") as f:
            f.write(text)
        os.replace(part, path)
    finally:
        if os.path.exists(part):
            os.unlink(part)


def file_digest(path):
    """The SHA-256 of a file's bytes: the data a sweep's runs were trained on."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
