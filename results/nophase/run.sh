#!/bin/bash
# The reference ablation without the key-phase embedding: the default recipe with phase_embedding
# off (the model is not handed position mod 8; it must find the cipher's period itself), everything
# else as results/reference/run.sh (the cpu preset, whole bytes, no merges; 4 epochs, at most 30
# minutes of training per run; every probe set). Validation also every 50 steps (the learning
# curve, curve.jsonl; it changes nothing of the run). Seeds 0 and 1 side by side, one torch thread
# each. Usage: results/nophase/run.sh [CONFIGS]   (default: c1 c2 c3 c4 c5). Then:
#   python results/nophase/make_readme.py
cd "$(dirname "$0")/../.."
configs=${1:-"c1 c2 c3 c4 c5"}
stream() {
  seed=$1
  for c in $configs; do
    python results/learn/probe.py --config "$c" --recipe cipher --set phase_embedding=false --set eval_every=50 \
      --minutes 30 --epochs 4 --resume --seed "$seed" --name "nophase-$c-seed$seed" --out results/nophase \
      --random 200 --all-test --more-sets
  done
}
stream 0 & stream 1 & wait
