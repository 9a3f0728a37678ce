"""The training chapter's claims about AdamW and a gradient spike, and the planner's per-GPU estimate it prints."""

import pytest

from cipherlab.analysis import plan as planner
from cipherbook.experiments import training as training_facts


def test_an_unclipped_spike_stays_in_adams_second_moment_after_the_first_has_forgotten_it():
    free, clipped = training_facts.adam_spike(clip=False), training_facts.adam_spike(clip=True)
    spike = 100
    assert free["v"][spike] > 100 * free["v"][spike - 1]  # a 100x gradient adds 10^4 times its square
    assert free["m"][spike + 50] < 1.2 * free["m"][spike - 1]  # beta1 = 0.9: gone after 50 steps
    assert free["v"][spike + 50] > 10 * free["v"][spike - 1]  # beta2 = 0.98: still there
    assert free["damped"] > 100 and clipped["damped"] == 0
    assert clipped["v"][spike] < 2 * clipped["v"][spike - 1]  # clipping keeps the spike out of v
    assert all(r["max_at_spike"] < 2 for r in (free, clipped))  # the step itself stays about lr


def _record(train_flops=6e13, val_flops=3e12, step_flops=3e11, params=10_000_000, activations=2e9,
            steps=100, val_steps=10, kernels=2000, val_kernels=700, collate=0.001, dispatch_us=20.0):
    """A plan_config record with only the fields gpu_estimate reads."""
    return {"train_epoch": {"train_flops": train_flops, "max_activation_bytes": activations, "steps": steps},
            "validation": {"forward_flops": val_flops, "steps": val_steps}, "typical_batch": {"flops": step_flops},
            "per_step": {"kernels": {"train_step": kernels, "validation_step": val_kernels},
                         "collate_seconds": collate, "dispatch_us_measured": dispatch_us},
            "state_bytes": planner.ADAM_BYTES_PER_PARAM * params,
            "autocast_bytes": planner.AUTOCAST_BYTES_PER_PARAM * params}


def test_gpu_estimate_divides_the_counted_flops_by_the_assumed_rate_and_memory_is_the_same_on_every_gpu():
    record = _record()
    t4 = planner.gpu_estimate(record, planner.GPUS["T4"], 0.3, 4.0, 100)
    h100 = planner.gpu_estimate(record, planner.GPUS["H100"], 0.3, 4.0, 100)
    assert t4["flop_epoch_seconds"] == pytest.approx((6e13 + 3e12) / (65e12 * 0.3))
    assert t4["flop_epoch_seconds"] / h100["flop_epoch_seconds"] == pytest.approx(989 / 65)
    # the per-step term is the same on every GPU: 100 steps x (2000 x 20 us + 1 ms) + 10 x (700 x 20 us + 1 ms)
    overhead = 100 * (2000 * 20e-6 + 0.001) + 10 * (700 * 20e-6 + 0.001)
    assert t4["overhead_epoch_seconds"] == pytest.approx(overhead) == h100["overhead_epoch_seconds"]
    assert t4["epoch_seconds"] == pytest.approx(t4["flop_epoch_seconds"] + overhead)
    assert (t4["dominant"], h100["dominant"]) == ("per-step", "per-step")
    assert t4["flop_step_seconds"] == pytest.approx(3e11 / (65e12 * 0.3))
    assert t4["step_seconds"] == pytest.approx(3e11 / (65e12 * 0.3) + 2000 * 20e-6 + 0.001)
    assert planner.gpu_estimate(record, planner.GPUS["T4"], 0.3, 4.0, 100, launch_us=0)["overhead_epoch_seconds"] \
        == pytest.approx(110 * 0.001)
    assert t4["epochs_in_session"] == int(4 * 3600 // t4["epoch_seconds"])
    assert t4["hours_for_max_epochs"] == pytest.approx(100 * t4["epoch_seconds"] / 3600)
    assert t4["peak_bytes"] == h100["peak_bytes"] == 18 * 10_000_000 + 2e9
    assert t4["fits"] and not planner.gpu_estimate(_record(activations=20e9), planner.GPUS["T4"], 0.3, 4.0, 100)["fits"]
