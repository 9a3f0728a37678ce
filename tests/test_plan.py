"""`python -m cipherlab plan`: time per epoch and peak memory on a GPU, estimated from measured FLOPs and bytes."""

import json

import pytest
import torch

from cipherlab.analysis import plan as planner
from cipherlab.__main__ import main
from cipherlab.base.config import make_config
from cipherlab.models import ModelArgs, Seq2SeqTransformer


def test_flops_are_counted_linear_in_the_batch_and_close_to_6_n_d():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(ModelArgs(64, 64, d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64,
                                         dropout=0.0))
    def batch(rows):
        return {"src": torch.randint(4, 64, (rows, 40)), "tgt": torch.randint(4, 64, (rows, 12))}
    one, three = planner.measure_step(model, batch(1), 0), planner.measure_step(model, batch(3), 0)
    assert three["forward_flops"] == 3 * one["forward_flops"] and three["backward_flops"] == 3 * one["backward_flops"]
    assert 1.5 < one["backward_flops"] / one["forward_flops"] < 2.5  # backward is about twice the forward
    assert three["activation_bytes"] > 2.5 * one["activation_bytes"] > 0


def test_plan_smoke_on_every_configuration(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--preset", "smoke", "--gpu", "l4", "--json", str(out)]) == 0
    report = capsys.readouterr().out
    assert report.startswith("ESTIMATE, not a measurement: preset smoke on an NVIDIA L4")
    assert "121 TFLOP/s" in report and "x 30 % utilisation" in report
    result = json.loads(out.read_text())
    assert result["estimate"] is True and [r["config"] for r in result["configs"]] == ["c1", "c2", "c3", "c4", "c5"]
    shared_us = min(r["per_step"]["dispatch_us_measured"] for r in result["configs"])  # the host's, charged to all
    assert {r["gpu"]["launch_us"] for r in result["configs"]} == {shared_us}
    assert "without a better validation accuracy" in report  # the score the default recipe selects on
    for r in result["configs"]:
        assert r["config"] in report
        assert r["params"] == sum(p.numel() for p in _model(r["config"]).parameters())
        e, g = r["train_epoch"], r["gpu"]
        assert e["steps"] >= e["chunks"] / make_config(r["config"], "smoke").max_batch_size
        assert e["train_flops"] > e["forward_flops"] > 0
        floor = (e["train_flops"] + r["validation"]["forward_flops"]) / (121e12 * 0.3)
        assert g["flop_epoch_seconds"] == pytest.approx(floor)
        per = r["per_step"]
        assert per["kernels"]["train_step"] > per["kernels"]["validation_step"] > 0 and per["dispatch_us_measured"] > 0
        overhead = (e["steps"] * (per["kernels"]["train_step"] * shared_us * 1e-6 + per["collate_seconds"])
                    + r["validation"]["steps"] * (per["kernels"]["validation_step"] * shared_us * 1e-6
                                                  + per["collate_seconds"]))
        assert g["overhead_epoch_seconds"] == pytest.approx(overhead)
        assert g["epoch_seconds"] == pytest.approx(floor + overhead)
        assert g["dominant"] == ("per-step" if overhead > floor else "FLOPs")
        assert g["peak_bytes"] > 16 * r["params"]


def _model(name):
    from cipherlab.data.corpus import load_corpus
    from cipherlab.pipeline.codec import fit_codec, select_lines

    config = make_config(name, "smoke")
    return fit_codec(config, select_lines(load_corpus(), config)).build_model(config)


def test_plan_assignment_c1_with_stand_in_tokenizers(monkeypatch, capsys):
    monkeypatch.setattr(planner, "_cached_bpe", lambda corpus, config: False)  # as in a fresh checkout
    assert main(["plan", "--preset", "assignment", "--gpu", "A100", "--config", "c1", "--hours", "2",
                 "--recipe", "notes", "--tokens", "notes"]) == 0
    report = capsys.readouterr().out
    assert "ESTIMATE" in report and "NVIDIA A100 40GB" in report and "epochs in 2 h" in report
    assert "STAND-IN BPEs" in report and "d_model 256, 8 heads, 4+4 layers" in report
    assert "9,683,968" in report  # C1 at the course notes' sizes (test_transformer has the closed form)
    # beside the one public measurement: C1, 40 epochs in 129 minutes on an RTX 2080 Ti
    assert "Beside a measurement" in report and "40 epochs in 129 min on an NVIDIA GeForce RTX 2080 Ti" in report
    assert "floor" in report and "estimate" in report


def test_plan_assignment_all_five_on_h100(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--preset", "assignment", "--gpu", "H100", "--mfu", "0.5", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    by = {r["config"]: r for r in result["configs"]}
    assert by["c3"]["params"] < by["c1"]["params"]  # GQA: fewer key/value weights
    assert by["c3"]["typical_batch"]["flops"] < by["c1"]["typical_batch"]["flops"]
    assert by["c1"]["train_epoch"]["steps"] == by["c2"]["train_epoch"]["steps"]  # same data, same BPEs
    assert all(r["gpu"]["fits"] for r in result["configs"])  # 10M parameters fit 80 GB easily
    assert "989 TFLOP/s" in capsys.readouterr().out


def test_plan_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--help"])
    assert e.value.code == 0
    assert "--gpu" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpu", "GTX480"], "--gpu GTX480: unknown GPU"),
        (["--gpu", "mine", "--tflops", "100"], "give both --tflops and --memory-gb"),
        (["--mfu", "0"], "--mfu 0.0: the utilisation is a share"),
        (["--hours", "-1"], "--hours -1.0: must be positive"),
        (["--launch-us", "-5"], "--launch-us -5.0: a time per kernel launch cannot be negative"),
        (["--preset", "huge"], "--preset huge: unknown preset"),
        (["--preset", "smoke", "--config", "c9"], "c9"),
        (["--preset", "smoke", "--data-dir", "NOWHERE"], "no plaintext file"),
    ],
)
def test_bad_input_is_one_line(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)
    args = [str(tmp_path / "nowhere") if a == "NOWHERE" else a for a in args]
    assert main(["plan", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cipherlab: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_kernel_counter_counts_computing_operators_not_views():
    x = torch.randn(4, 6)
    with planner._KernelCounter() as counter:
        y = x.view(6, 4).t().unsqueeze(0)  # views: no kernel
    assert counter.count == 0
    with planner._KernelCounter() as counter:
        (y * 2 + 1).sum()  # three kernels
    assert counter.count == 3


def test_counting_a_training_step_leaves_the_model_as_it_was():
    torch.manual_seed(0)
    config = make_config("c1", "smoke")
    model = Seq2SeqTransformer(ModelArgs(64, 64, d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64,
                                         dropout=0.0))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batch = {"src": torch.randint(4, 64, (2, 10)), "tgt": torch.randint(4, 64, (2, 7))}
    counts = planner.count_kernels(model, batch, 0, config)
    assert counts["train_step"] == counts["forward"] + counts["backward"] + counts["optimizer"]
    assert counts["optimizer"] > 0 and counts["backward"] > counts["forward"] / 2
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_launch_us_overrides_the_measured_cost_per_kernel(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--preset", "smoke", "--config", "c1", "--gpu", "A100", "--launch-us", "0",
                 "--json", str(out)]) == 0
    g = json.loads(out.read_text())["configs"][0]["gpu"]
    per = json.loads(out.read_text())["configs"][0]["per_step"]
    steps = json.loads(out.read_text())["configs"][0]
    assert g["launch_us"] == 0
    assert g["overhead_epoch_seconds"] == pytest.approx(
        (steps["train_epoch"]["steps"] + steps["validation"]["steps"]) * per["collate_seconds"])
    assert "--launch-us 0" in capsys.readouterr().out


def test_the_plan_sets_the_cpu_runs_steps_and_seconds_beside_its_own_and_says_which_to_trust(tmp_path):
    """The assignment preset's CPU records (results/assignment-cpu) give the steps an epoch took and the
    seconds a step; the report prints them beside the plan's count and names what to trust. Other
    presets, overridden plans and folders without records get nothing."""
    plan = {"preset": "assignment", "configs": [{"config": "c1", "train_epoch": {"steps": 1000}},
                                                 {"config": "c2", "train_epoch": {"steps": 900}}]}
    (tmp_path / "c1-seed0.json").write_text(json.dumps({"log": [{"step": 1200, "seconds": 600.0}]}))
    got = planner.cpu_measurement(plan, tmp_path)
    assert got["configs"] == {"c1": {"steps": 1200, "seconds_per_step": 0.5, "plan_steps": 1000,
                                     "record": str(tmp_path / "c1-seed0.json")}}
    assert planner.cpu_measurement({**plan, "preset": "cpu"}, tmp_path) is None
    assert planner.cpu_measurement({**plan, "overrides": {"lr": "0.1"}}, tmp_path) is None
    assert planner.cpu_measurement(plan, tmp_path / "none") is None
    committed = planner.cpu_measurement(plan)  # the repository's own records
    assert committed["folder"] == "results/assignment-cpu" and set(committed["configs"]) == {"c1", "c2"}
    assert all(m["steps"] > 1000 and 0 < m["seconds_per_step"] < 10 for m in committed["configs"].values())
