#!/usr/bin/env bash
# The main job: install what building and running it need, build the library and
# hogwild_train alone (no tests, benchmarks, examples or GPU code: scripts/build.sh
# builds those), and train a softmax model on Fashion-MNIST with 4 Hogwild!
# workers, printing one line per epoch and the final test accuracy. Extra arguments
# go to hogwild_train (e.g. --mode lock).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --run
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release -Dwerror=true -Dcuda=disabled -Dtests=disabled
fi
ninja -C build src/hogwild_train
data=/usr/share/datasets/fashion-mnist
exec build/src/hogwild_train \
  --train "$data/train-images-idx3-ubyte.gz" --test "$data/t10k-images-idx3-ubyte.gz" \
  --model softmax --workers 4 --mode hogwild --epochs 10 --batch 8 --lr 0.05 --lr-decay 0.9 \
  "$@"
