"""One calibration run of results/calibration/calibration.json: train, then score on validation lines.

    OMP_NUM_THREADS=1 python results/calibration/calibrate.py c2 360 /tmp/cal/E '{"rope_cross_attention": true}'

Arguments: configuration, wall-clock training budget in seconds, output folder, and Config
overrides as JSON on top of the cpu preset (max_eval_lines defaults to 60). Prints each epoch
and a RESULT line with the greedy metrics of best.pt on the validation lines. The test split is
never touched: these runs chose the cpu preset's settings.
"""
import json
import sys
import time
from cipherlab.base.config import make_config
from cipherlab.runner.training import train_config
from cipherlab.runner.evaluate import evaluate_checkpoint
name, budget, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
over = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
over.setdefault("max_eval_lines", 60)
cfg = make_config(name, "cpu", **over)
t = time.time()
run = train_config(cfg, out, time_budget_s=budget, verbose=True)
print("trained", time.time() - t, run.params, flush=True)
m = evaluate_checkpoint(run.best_checkpoint, split="val", length_aware=False)
print("RESULT", name, json.dumps(over), {k: m[k] for k in m if isinstance(m[k], (int, float)) and not isinstance(m[k], bool)}, flush=True)
