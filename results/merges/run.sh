#!/bin/bash
# Which BPE learns the cipher? C1 of the cpu preset, seed 0, the default recipe, one torch thread,
# each run with another tokenisation of C1-C4 (everything else as results/reference), then decoded
# on 50 random strings, the 500 docstring lines and the 200 Brown test lines. The runs were made
# two or three at a time on a 2-core machine; the records are written to runs/merges and copied
# here. Then:
#   python results/merges/make_readme.py
cd "$(dirname "$0")/../.."
p() { python results/learn/probe.py --config c1 --minutes 14 --seed 0 --out runs/merges --random 50 "$@"; }
p --epochs 3 --name m-src512-chars --set src_vocab=512
p --epochs 3 --name m-chars-tgt1000 --set tgt_vocab=1000
p --epochs 4 --name m-phase2560-aligned-bits --set source_mode=phase --set src_vocab=2560 --set tgt_vocab=null \
  --set target_tokens=aligned --set eval_every=100
p --epochs 4 --name m-phase2560-chunks --set source_mode=phase --set src_vocab=2560 --set tgt_vocab=null \
  --set target_tokens=aligned --set merges_on=chunks --set eval_every=100
p --epochs 4 --name m-phase3072-chunks --set source_mode=phase --set src_vocab=3072 --set tgt_vocab=null \
  --set target_tokens=aligned --set merges_on=chunks --set eval_every=100
p --epochs 4 --name m-phase2560-chunks-chars --set source_mode=phase --set src_vocab=2560 --set tgt_vocab=null \
  --set merges_on=chunks --set eval_every=100
cp runs/merges/m-*.json results/merges/
# m-phase3072-chunks-tokenphase.json is results/aligned/run.sh's C1 seed 0 (its `command`) as it ran before
# BPE-dropout joined the aligned tokenisation (--set bpe_dropout=0 reruns it), copied here under this name.
