#!/usr/bin/env bash
# `meson install` into a scratch root, then build tests/install/consumer against the
# installed tree two ways, plain c++ with pkg-config and a meson project finding
# hogwild.pc, each consumer to train and exit 0; then (unless HOGWILD_SKIP_SUBPROJECT=1)
# a meson project with hogwild as a subproject, its consumer compiled and its link
# checked to take the subproject's library. The installed CLIs must run.
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
# The study tools find the file handling they share where it is installed.
/usr/bin/python3 "$(find "$root" -path '*bin/hogwild_sweep')" --help > /dev/null ||
  { echo "the installed hogwild_sweep does not start"; exit 1; }

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
import os
server = os.readlink(f'/proc/{hogwild.fork_server_pid}/exe')
assert server.startswith('$site') and server.endswith('/hogwild-fork-server'), server
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
  # What a subproject changes is how the library's headers, generated config.hpp and
  # dependency reach the consumer, not the library's code (the release build's): the
  # consumer is compiled through them, and its link must take the subproject's
  # libhogwild. The library is not compiled again (it was 3-4 minutes of this check,
  # run alone, on 2 cores).
  meson setup "$tmp/sub-build" "$tmp/sub" --force-fallback-for=hogwild --buildtype=plain >/dev/null
  object=$(ninja -C "$tmp/sub-build" -t targets all | sed -n 's/^\(consumer\.p\/[^:]*\.o\): .*/\1/p' | head -1)
  [ -n "$object" ] || { echo "no consumer object in the subproject build"; exit 1; }
  ninja -C "$tmp/sub-build" "$object" >/dev/null
  ninja -C "$tmp/sub-build" -t commands consumer | tail -1 | grep -q 'subprojects/hogwild/src/libhogwild' ||
    { echo "the consumer does not link the subproject's libhogwild"; exit 1; }
fi
echo "install check passed"
