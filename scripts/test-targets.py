#!/usr/bin/env python3
"""test-targets.py BUILD [--exclude-suites S1,S2] [NAME...]: the build outputs (paths
relative to BUILD, one a line) that the meson tests named NAME (or, with no NAME,
every test outside the excluded suites) run, and every target in BUILD/src (the
library and the tools, which tests run by path), for `ninja -C BUILD $(...)` to
build those only (scripts/test.sh's sanitizer stages: no bench or example compiled
that no test there runs)."""
import json
import os
import subprocess
import sys

args = sys.argv[1:]
build = args.pop(0)
excluded = set()
if args[:1] == ["--exclude-suites"]:
    excluded = set(args[1].split(","))
    args = args[2:]
names = set(args)


def introspect(what):
    return json.loads(subprocess.check_output(["meson", "introspect", what, build]))


targets = introspect("--targets")
by_id = {t["id"]: t for t in targets}
root = os.path.realpath(build)
found, out = set(), set()
for test in introspect("--tests"):
    suites = {s.split(":")[-1] for s in test["suite"]}
    if names and test["name"] not in names:
        continue
    if suites & excluded:
        continue
    found.add(test["name"])
    for dep in test["depends"]:
        for f in by_id[dep]["filename"]:
            out.add(os.path.relpath(f, root))
missing = names - found
if missing:
    sys.exit(f"test-targets.py: no such test in {build}: {' '.join(sorted(missing))}")
for t in targets:
    for f in t["filename"]:
        rel = os.path.relpath(f, root)
        if rel.startswith("src" + os.sep):
            out.add(rel)
print("\n".join(sorted(out)))
