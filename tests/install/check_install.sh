#!/usr/bin/env bash
# `meson install` into a scratch root, then build tests/install/consumer against the
# installed tree three ways: plain c++ with pkg-config, a meson project finding
# hogwild.pc, and (unless HOGWILD_SKIP_SUBPROJECT=1) a meson project with hogwild as
# a subproject. Each consumer must train and exit 0; the installed CLIs must run.
#   check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
source=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root

meson install -C "$build" --destdir "$root" --no-rebuild --quiet
pc=$(find "$root" -name hogwild.pc | head -1)
[ -n "$pc" ] || { echo "no hogwild.pc installed"; exit 1; }
libdir=$(dirname "$(find "$root" -name 'libhogwild.so' | head -1)")
for f in hogwild/trainer.hpp hogwild/model_base.hpp hogwild/models/linear.hpp hogwild/config.hpp; do
  [ -n "$(find "$root" -path "*include/$f")" ] || { echo "header $f not installed"; exit 1; }
done
export LD_LIBRARY_PATH=$libdir

echo "== installed CLIs, man pages and docs"
for tool in hogwild_train hogwild_data hogwild_predict; do
  "$(find "$root" -path "*bin/$tool")" --version
done
for tool in hogwild_train hogwild_data hogwild_predict hogwild_sweep hogwild_plot; do
  if command -v help2man >/dev/null; then
    [ -n "$(find "$root" -path "*man/man1/$tool.1")" ] || { echo "no man page for $tool"; exit 1; }
  fi
done
[ -n "$(find "$root" -path '*doc/hogwild/CLI.md')" ] || { echo "docs not installed"; exit 1; }

# The Python module, where built: installed where the interpreter it was built for
# looks (its own site directory under the prefix), and it trains from there.
init=$(find "$root" -path '*dist-packages/hogwild/__init__.py' | head -1)
if [ -n "$(find "$build/python" -name '_hogwild*.so' 2>/dev/null)" ]; then
  echo "== installed Python module"
  [ -n "$init" ] || { echo "the Python module was built but not installed"; exit 1; }
  site=$(dirname "$(dirname "$init")")
  inside=${site#"$root"}
  /usr/bin/python3 -c "import sys; sys.exit('$inside' not in sys.path)" ||
    { echo "$inside is not on /usr/bin/python3's path"; exit 1; }
  (cd "$tmp" && PYTHONPATH=$site /usr/bin/python3 -c "
import numpy as np, hogwild
assert hogwild.__file__.startswith('$site'), hogwild.__file__
X = np.random.default_rng(0).random((400, 8), dtype=np.float32)
y = (X[:, 0] > 0.5).astype(np.float32)
r = hogwild.train((X, y), test=(X, y), workers=2, epochs=5, lr=0.5)
assert r.summary['test_accuracy'] > 0.8, r.summary['test_accuracy']
print('installed module trained:', r.line)") || exit 1
fi

# hogwild.pc where it was installed, its prefix found from its place (--define-prefix):
# a user's compile needs nothing else, and no path outside the tree.
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-prefix --cflags --libs hogwild)
echo "== c++ with pkg-config: $flags"
for flag in $flags; do
  case "$flag" in
    -I"$root"/*|-L"$root"/*|-lhogwild|-pthread) ;;
    *) echo "hogwild.pc gives more than a compile needs: $flag"; exit 1 ;;
  esac
done
# shellcheck disable=SC2086
c++ -std=c++20 -o "$tmp/consumer" "$source/tests/install/consumer/consumer.cpp" $flags
"$tmp/consumer"
# shellcheck disable=SC2086
c++ -std=c++20 -o "$tmp/save_and_predict" "$source/examples/save_and_predict.cpp" $flags
"$tmp/save_and_predict"
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$root

echo "== meson project, dependency('hogwild') from the installed hogwild.pc"
meson setup "$tmp/meson-build" "$source/tests/install/consumer" >/dev/null
ninja -C "$tmp/meson-build" >/dev/null
"$tmp/meson-build/consumer"

if [ "${HOGWILD_SKIP_SUBPROJECT:-0}" != 1 ]; then
  echo "== meson project, hogwild as a subproject"
  unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR LD_LIBRARY_PATH
  cp -r "$source/tests/install/consumer" "$tmp/sub"
  dst=$tmp/sub/subprojects/hogwild
  mkdir -p "$dst"
  # The sources without build directories, as a wrap or a git submodule provides them.
  if git -C "$source" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$source" ls-files -z --cached --others --exclude-standard
  else
    (cd "$source" && find . -type f -not -path './build*' -print0)
  fi | (cd "$source" && xargs -0 cp --parents -t "$dst")
  # (plain: no debug information, which this check never reads: the library compiled
  # a second time is most of the install suite's time.)
  meson setup "$tmp/sub-build" "$tmp/sub" --force-fallback-for=hogwild --buildtype=plain >/dev/null
  ninja -C "$tmp/sub-build" consumer >/dev/null
  "$tmp/sub-build/consumer"
fi
echo "install check passed"
