#!/bin/bash
# C1 of results/aligned trained on: its 4-epoch run (runs/learn/aligned-c1-seed<k>, copied to
# runs/learn/aligned-long-c1-seed<k>) resumed to 12 epochs, at most 24 more minutes of training, so that
# the whole run stays within the 30 minutes the goals allow. Seeds 0 and 1 side by side, one thread each.
cd "$(dirname "$0")/../../.."
for seed in 0 1; do
  cp -r "runs/learn/aligned-c1-seed$seed" "runs/learn/aligned-long-c1-seed$seed" 2>/dev/null
  python results/learn/probe.py --config c1 --recipe cipher --tokens aligned --set eval_every=50 \
    --minutes 24 --epochs 12 --resume --seed "$seed" --name "aligned-long-c1-seed$seed" --out results/aligned/long \
    --random 200 --all-test --more-sets &
done
wait
