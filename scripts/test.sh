#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite: the release build,
# then the whole suite under ASan+UBSan, then the shared-memory and trainer tests
# under TSan. Ends with the line "N passed, N failed"; exit 0 only when all pass.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
scripts/build.sh || exit 1

status=0
logs=()
run_suite() {  # build-dir setup-args... -- test-args...
  local dir=$1; shift
  local setup=() test=()
  while [ "$1" != "--" ]; do setup+=("$1"); shift; done; shift
  test=("$@")
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "${setup[@]}" >/dev/null || { status=1; return; }
  fi
  ninja -C "$dir" >/dev/null || { echo "build of $dir failed"; ninja -C "$dir" | tail -30; status=1; return; }
  echo "== tests in $dir ${test[*]}"
  meson test -C "$dir" --print-errorlogs --num-processes 2 "${test[@]}" || status=1
  logs+=("$dir/meson-logs/testlog.json")
}

run_suite build -- 
if [ "${HOGWILD_SKIP_SANITIZERS:-0}" != 1 ]; then
  run_suite build-asan -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true -- --no-suite install
  run_suite build-tsan -Dbuildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false -Dwerror=true -- arena models labels optimizer trainer
fi

python3 - "${logs[@]}" <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        r = json.loads(line)["result"]
        if r in ("OK", "EXPECTEDFAIL"): passed += 1
        elif r == "SKIP": skipped += 1
        else: failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
