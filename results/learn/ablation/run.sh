#!/bin/bash
# The controlled ablation of issue 16 as it was run: seeds 0 and 1 side by side (one torch thread
# each), C1..C5 in turn, 4 epochs and at most 30 minutes of training per run; seed 0 also exports
# its models to checkpoints/. Then: python results/learn/ablation/make_readme.py
# (The records' `command` fields show C1 resumed with --resume after its first two epochs: the run
# was stopped and continued, which on CPU gives the same weights as one uninterrupted run.)
cd "$(dirname "$0")/../../.."
stream() {
  seed=$1
  for c in c1 c2 c3 c4 c5; do
    extra=()
    if [ "$seed" = 0 ]; then extra=(--export "results/learn/ablation/checkpoints/$c.safetensors"); fi
    python results/learn/probe.py --config "$c" --minutes 30 --epochs 4 --resume --seed "$seed" --name "$c-seed$seed" \
      --out results/learn/ablation --random 200 --all-test "${extra[@]}" \
      --set phase_shuffle=1.0 --set bit_embeddings=true --set phase_embedding=true --set select_on=val_accuracy
  done
}
stream 0 & stream 1 & wait
