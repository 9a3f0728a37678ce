#!/bin/bash
# The reference ablation's C1-C4 again with a BPE that learns merges: the aligned tokenisation
# (TOKENIZATIONS["aligned"] in cipherlab/base/config.py: 1,021 merges over the cipher bytes tagged with
# their key phase, learned on the training chunks as the recipe shows them; target token i is the
# plaintext of source token i). Everything else as results/reference/run.sh: the cpu preset, the
# default recipe, seeds 0 and 1 side by side (one torch thread each), 4 epochs and at most 30
# minutes of training per run, every probe set. Validation also every 50 steps (the learning
# curve, curve.jsonl; it changes nothing of the run). Seed 0 exports its models here. Then:
#   python results/aligned/make_readme.py
cd "$(dirname "$0")/../.."
stream() {
  seed=$1
  for c in c1 c2 c3 c4; do
    extra=()
    if [ "$seed" = 0 ]; then extra=(--export "results/aligned/$c.safetensors"); fi
    python results/learn/probe.py --config "$c" --recipe cipher --tokens aligned --set eval_every=50 \
      --minutes 30 --epochs 4 --resume --seed "$seed" --name "aligned-$c-seed$seed" --out results/aligned \
      --random 200 --all-test --more-sets "${extra[@]}"
  done
}
stream 0 & stream 1 & wait
