#!/usr/bin/env python3
"""test-targets.py BUILD NAME...: the build outputs (paths relative to BUILD, one a
line) that the meson tests named NAME run, for `ninja -C BUILD $(...)` to build
those and what they depend on only (scripts/test.sh's TSan stage)."""
import json
import os
import subprocess
import sys

build, names = sys.argv[1], set(sys.argv[2:])


def introspect(what):
    return json.loads(subprocess.check_output(["meson", "introspect", what, build]))


targets = {t["id"]: t for t in introspect("--targets")}
root = os.path.realpath(build)
found, out = set(), set()
for test in introspect("--tests"):
    if test["name"] not in names:
        continue
    found.add(test["name"])
    for dep in test["depends"]:
        for f in targets[dep]["filename"]:
            out.add(os.path.relpath(f, root))
missing = names - found
if missing:
    sys.exit(f"test-targets.py: no such test in {build}: {' '.join(sorted(missing))}")
print("\n".join(sorted(out)))
