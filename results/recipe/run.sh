#!/bin/bash
# The recipe, part by part: C1 and C2 of the reference ablation (results/reference/run.sh: the cpu
# preset, whole bytes, no merges, 4 epochs, at most 30 minutes of training, every probe set) trained
# again with one part of the default recipe off, seeds 0 and 1 side by side, one torch thread each,
# and a validation every 50 steps (the learning curve). Each part's runs go to a folder of its own.
# The key-phase embedding off is results/nophase (all five configurations).
# Usage: results/recipe/run.sh [PARTS] [CONFIGS]
#   PARTS    default: "no-bit-embeddings no-phase-shuffle no-case-flip no-source-eos select-on-loss"
#   CONFIGS  default: "c1 c2"
# Then: python results/recipe/make_readme.py
cd "$(dirname "$0")/../.."
parts=${1:-"no-bit-embeddings no-phase-shuffle no-case-flip no-source-eos select-on-loss"}
configs=${2:-"c1 c2"}
setting() {
  case $1 in
    no-bit-embeddings) echo "bit_embeddings=false" ;;
    no-phase-shuffle) echo "phase_shuffle=0 case_flip=0" ;;  # case flips apply to shuffled chunks only
    no-case-flip) echo "case_flip=0" ;;
    no-source-eos) echo "source_eos=false" ;;
    select-on-loss) echo "select_on=val_loss" ;;
    *) echo "results/recipe/run.sh: unknown part '$1'; choose among no-bit-embeddings no-phase-shuffle no-case-flip no-source-eos select-on-loss" >&2; exit 2 ;;
  esac
}
for part in $parts; do setting "$part" >/dev/null || exit 2; done
stream() {
  seed=$1
  for part in $parts; do
    for c in $configs; do
      sets=(); for s in $(setting "$part"); do sets+=(--set "$s"); done
      python results/learn/probe.py --config "$c" --recipe cipher "${sets[@]}" --set eval_every=50 \
        --minutes 30 --epochs 4 --resume --seed "$seed" --name "$part-$c-seed$seed" --out "results/recipe/$part" \
        --random 200 --all-test --more-sets
    done
  done
}
stream 0 & stream 1 & wait
