#!/bin/bash
# The reference ablation: the default recipe ("cipher", cipherlab/base/config.py RECIPES) for all five
# configurations of the cpu preset, seeds 0 and 1 side by side (one torch thread each), C1..C5 in
# turn, 4 epochs and at most 30 minutes of training per run. Every run is then decoded on all 500
# Brown test lines (free and length-aware), 200 random strings and the other probe sets of
# cipherlab/analysis/probes.py. Seed 0 exports its models to results/checkpoints/. Then:
#   python results/reference/make_readme.py
cd "$(dirname "$0")/../.."
stream() {
  seed=$1
  for c in c1 c2 c3 c4 c5; do
    extra=()
    if [ "$seed" = 0 ]; then extra=(--export "results/checkpoints/$c.safetensors"); fi
    python results/learn/probe.py --config "$c" --recipe cipher --minutes 30 --epochs 4 --resume --seed "$seed" \
      --name "ref-$c-seed$seed" --out results/reference --random 200 --all-test --more-sets "${extra[@]}"
  done
}
stream 0 & stream 1 & wait
