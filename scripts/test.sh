#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite: the release build;
# then, in one clang build with ASan+UBSan and libFuzzer's coverage, the whole suite
# but the install check and the benches, and each libFuzzer target for about 20
# seconds; then the shared-memory, trainer and checkpoint tests under TSan (clang).
# The sanitizer builds are clang's at -O1 with line tables: GCC takes twice as long
# for the same objects (src/model_file.cpp under ASan+UBSan: 46 s against 23 s), and
# one build serves the ASan tests and the fuzzers (the fuzzers had a build of their
# own, the whole library compiled a third time). They leave the GPU half out (nvcc
# would compile the .cu files again in each; the release build has it where CUDA is).
# Ends with the line "N passed, N failed, N skipped"; exit 0 only when all pass.
# HOGWILD_SKIP_SANITIZERS=1 skips the sanitizer stages (and so the fuzzers),
# HOGWILD_SKIP_FUZZ=1 the fuzzers, HOGWILD_FUZZ_SECONDS=N changes the time per target.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
scripts/build.sh || exit 1

status=0
logs=()
run_suite() {  # build-dir setup-args... -- test-args...   ($targets: what to build; all if empty)
  local dir=$1; shift
  local setup=() test=()
  while [ "$1" != "--" ]; do setup+=("$1"); shift; done; shift
  test=("$@")
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "${setup[@]}" >/dev/null || { status=1; return; }
  fi
  local t0=$SECONDS
  ninja -C "$dir" "${targets[@]}" >/dev/null || { echo "build of $dir failed"; ninja -C "$dir" "${targets[@]}" | tail -30; status=1; return; }
  echo "== built $dir in $((SECONDS - t0)) s; tests ${test[*]}"
  t0=$SECONDS
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 "${test[@]}" || status=1
  echo "== tests in $dir took $((SECONDS - t0)) s"
  logs+=("$dir/meson-logs/testlog.json")
}

# The build outputs (paths relative to the build folder $1) that the tests named
# after it run (scripts/test-targets.py).
test_targets() {
  python3 scripts/test-targets.py "$@"
}

targets=()
run_suite build -- 

# The sanitizer builds: clang, -O1 with line tables (the reports' stacks), no GPU half,
# and unity builds (meson's --unity: 4 sources a compilation, headers parsed once for
# them): the ASan stage's build took 485 s against 622 s on the 2-core Xeon (the
# library gains, each test being mostly one source). The release build is
# not one: it alone checks that every source includes what it uses. A clash between
# two sources' file-local names shows here first, as a compile error naming both.
san_setup=(-Doptimization=1 -Ddebug=false -Db_ndebug=false -Dcpp_args=-gline-tables-only
           -Db_lundef=false -Dwerror=true -Dpython=disabled -Dcuda=disabled -Dnccl=disabled
           --unity on)
fuzz_log=build-asan/fuzz-results.json
if [ "${HOGWILD_SKIP_SANITIZERS:-0}" != 1 ]; then
  # ASan+UBSan: every test but the install check and the benches (measurement
  # tools, whose smoke runs the release stage has run), and only what those run
  # built; the fuzz targets beside them.
  fuzz_targets=(libsvm idx cache checkpoint ratings)
  if [ ! -f build-asan/build.ninja ]; then
    CXX=clang++ meson setup build-asan "${san_setup[@]}" -Db_sanitize=address,undefined -Dfuzz=true \
      >/dev/null || status=1
  fi
  mapfile -t targets < <(test_targets build-asan --exclude-suites install,bench)
  targets+=("${fuzz_targets[@]/#/tests/fuzz/fuzz_}")
  run_suite build-asan -- --no-suite install --no-suite bench
  targets=()

  # libFuzzer: each target on its seed corpus (copied, so findings never touch the
  # tree); any crash, leak, timeout or out-of-memory fails the stage. Results are
  # recorded in build-asan/fuzz-results.json (one line per target, as meson's log).
  if [ "${HOGWILD_SKIP_FUZZ:-0}" = 1 ]; then
    :
  elif [ ! -x build-asan/tests/fuzz/fuzz_libsvm ]; then
    echo "the fuzz targets were not built (build-asan)"; status=1
  else
    : > "$fuzz_log"
    for t in "${fuzz_targets[@]}"; do
      work=build-asan/fuzz-work/$t
      rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
      cp tests/fuzz/corpus/"$t"/* "$work/corpus/"
      echo "== fuzzing $t for ${HOGWILD_FUZZ_SECONDS:-20}s"
      if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
         build-asan/tests/fuzz/fuzz_"$t" "$work/corpus" -max_total_time="${HOGWILD_FUZZ_SECONDS:-20}" \
           -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
           -artifact_prefix="$work/artifacts/" >"$work/log.txt" 2>&1; then
        grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/log.txt" | tr '\n' ' '; echo
        echo '{"result": "OK"}' >> "$fuzz_log"
      else
        echo "fuzz_$t found a problem:"; tail -40 "$work/log.txt"; ls "$work/artifacts"
        echo '{"result": "FAIL"}' >> "$fuzz_log"
        status=1
      fi
    done
    logs+=("$fuzz_log")
  fi

  # TSan: the shared-memory, trainer and checkpoint tests, and only what they need
  # built (their programs and what those depend on; the tools, benches and examples
  # are not compiled a third time).
  tsan_tests=(arena device_arena device_run mlp_steps comm ring ps ps_gloo ddp models labels
              optimizer trainer restart checkpoint replica layout balance hot_coordinates byte_rows
              epoch_order metrics striped model_file)
  if [ ! -f build-tsan/build.ninja ]; then
    CXX=clang++ meson setup build-tsan "${san_setup[@]}" -Db_sanitize=thread >/dev/null || status=1
  fi
  mapfile -t targets < <(test_targets build-tsan "${tsan_tests[@]}")
  run_suite build-tsan -- "${tsan_tests[@]}"
  targets=()
fi

# What the release build compiled in (the GPU half needs the CUDA toolkit found).
echo "== optional parts built: $(grep -oE 'HOGWILD_HAVE_[A-Z]+ [01]' build/include/hogwild/config.hpp | sed 's/HOGWILD_HAVE_//' | tr '\n' ' ')"
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
