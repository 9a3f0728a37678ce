"""``report`` on runs trained with a student's own parts (``--part``): the inputs table says whose parts are in
which run and flags a folder that mixes them with cipherlab's own; a table names each run's class, file and
hashes (issue 37)."""

import json

import pytest

from cipherlab.analysis import report

from cipherlab.analysis import ablation

NOTES = ablation.REPO_RESULTS_DIR / "notes" / "cpu"


def _runs(tmp_path, parts_of):
    """Copies of the committed notes records (outcomes per line added), with ``parts_of[name]`` as their parts."""
    runs = tmp_path / "runs"
    runs.mkdir(parents=True)
    for name in ("c1", "c2", "c3", "c4", "c5"):
        record = json.loads((NOTES / f"{name}.json").read_text(encoding="utf-8"))
        outcomes = "1101" if name == "c1" else "0101"
        record["sets"]["test"].update(lines=4, exact_by_line=outcomes, exact_lines=outcomes.count("1"),
                                      sequence_accuracy=outcomes.count("1") / 4)
        if parts_of.get(name):
            record["parts"] = parts_of[name]
        (runs / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
    return runs


def _mine(cls="MyAttention", digest="a" * 64):
    return [{"part": "attention", "file": "/home/me/my_attention.py", "class": cls, "sha256": "f" * 64,
             "class_sha256": digest}]


def test_a_folder_mixing_own_and_cipherlabs_parts_says_so_and_names_each_runs_parts(tmp_path):
    built = report.build_report(_runs(tmp_path, {name: _mine() for name in ("c1", "c2", "c3")}))
    inputs = dict(built.inputs)
    assert inputs["parts"].startswith("attention: yours in C1, C2, C3, cipherlab's in C4 (no place for it in C5) — "
                                      "MIXED: attention (mha) is yours in C1, C2 and cipherlab's in C4: "), \
        inputs["parts"]
    text = built.markdown()
    assert "| C1 | attention | MyAttention | /home/me/my_attention.py | aaaaaaaaaaaa | ffffffffffff |" in text
    assert "| C5 | all | cipherlab's own | – | – | – |" in text
    assert "(+0 −1, p = 1)" in text  # the paired comparison, from the records' per-line outcomes


def test_two_versions_of_one_class_are_flagged_and_one_class_everywhere_is_not(tmp_path):
    same = report.build_report(_runs(tmp_path / "same", {n: _mine() for n in ("c1", "c2", "c3", "c4", "c5")}))
    assert "MIXED" not in dict(same.inputs)["parts"]
    edited = {"c1": _mine(), "c2": _mine(digest="b" * 64)}
    line = report.parts_summary({"C1": {"parts": edited["c1"]}, "C2": {"parts": edited["c2"]}})
    assert "MIXED: attention is 2 different classes or versions of one" in line
    assert report.parts_summary({"C1": {}, "C2": {"parts": []}}) is None  # cipherlab's own everywhere: nothing added
    plain = report.build_report(_runs(tmp_path / "plain", {}))
    assert "parts" not in dict(plain.inputs) and "Parts each run" not in plain.markdown()


def test_table_md_names_the_parts_and_says_when_they_are_mixed(tmp_path):
    from cipherlab.runner.evaluate import write_table
    from cipherlab.student.parts import parts_lines
    runs = _runs(tmp_path, {name: _mine() for name in ("c1", "c2")})
    table = write_table(runs, notes=parts_lines)[0].read_text(encoding="utf-8")
    assert ("Parts (--part): C1: attention = MyAttention of /home/me/my_attention.py (class sha256 aaaaaaaaaaaa); "
            "C2: attention = MyAttention") in table and "C3: cipherlab's own" in table
    assert "Mixed: attention (mha) is yours in C1, C2 and cipherlab's in C4; their differences include" in table


# --------------------------------------------------------------------------- only where the runs hold the part (issue 52)


def _part(part, cls, digest, file=None):
    return {"part": part, "file": file or f"/home/me/{cls.lower()}.py", "class": cls, "sha256": "f" * 64,
            "class_sha256": digest * 64}


ATTENTION, LAYERNORM, RMSNORM = _part("attention", "MyAttention", "a"), _part("norm", "MyLayerNorm", "b"), \
    _part("norm", "MyRMSNorm", "c")
SINUSOIDAL, ROPE = _part("positional", "MySinusoidal", "d"), _part("rope", "MyRoPE", "e")
# the student's parts wherever they apply: no sinusoidal encoding in C2, a rotary one only there, an RMSNorm in
# C4 (C1-C3's LayerNorm is another class by design) and no part at all in C5, the BLT
CONSISTENT = {"c1": [ATTENTION, LAYERNORM, SINUSOIDAL], "c2": [ATTENTION, LAYERNORM, ROPE],
              "c3": [ATTENTION, LAYERNORM, SINUSOIDAL], "c4": [ATTENTION, RMSNORM, SINUSOIDAL]}


def _summary(parts_of, seeds=None):
    """parts_summary of records named as report names them, each with its configuration's components."""
    from cipherlab.base.config import make_config
    runs = {}
    for name, parts in parts_of.items():
        config, _, seed = name.partition(" seed ")
        runs[name.upper() if not seed else f"{config.upper()} seed {seed}"] = {
            "config": config, "components": make_config(config).components(), "parts": parts}
    return report.parts_summary(runs)


def test_the_students_parts_wherever_they_apply_are_not_mixed(tmp_path):
    line = _summary(CONSISTENT)
    assert line == ("attention: yours in C1, C2, C3, C4; norm: yours in C1, C2, C3, C4; positional: yours in C1, "
                    "C3, C4 (no place for it in C2); rope: yours in C2 (no place for it in C1, C3, C4)"), line
    runs = _runs(tmp_path, CONSISTENT)  # with C5, which takes no part
    built = report.build_report(runs)
    assert dict(built.inputs)["parts"] == (
        "attention: yours in C1, C2, C3, C4 (no place for it in C5); norm: yours in C1, C2, C3, C4 (no place for it "
        "in C5); positional: yours in C1, C3, C4 (no place for it in C2, C5); rope: yours in C2 (no place for it in "
        "C1, C3, C4, C5)")
    from cipherlab.runner.evaluate import write_table
    from cipherlab.student.parts import parts_lines
    assert "Mixed" not in write_table(runs, notes=parts_lines)[0].read_text(encoding="utf-8")


@pytest.mark.parametrize("change, said", [
    ({"c3": [ATTENTION, SINUSOIDAL]}, "norm (layernorm) is yours in C1, C2 and cipherlab's in C3"),
    ({"c3": [ATTENTION, _part("norm", "OtherLayerNorm", "f"), SINUSOIDAL]},
     "norm (layernorm) is 2 different classes or versions of one in C1, C2, C3"),
    ({"c2": [_part("attention", "OtherAttention", "f"), LAYERNORM, ROPE]},
     "attention (mha) is 2 different classes or versions of one in C1, C2, C4"),
    ({"c4": [ATTENTION, RMSNORM]}, "positional is yours in C1, C3 and cipherlab's in C4"),
    ({"c1": [LAYERNORM, SINUSOIDAL]}, "attention (mha) is yours in C2, C4 and cipherlab's in C1"),
    ({"c3": [_part("attention", "MyAttention", "9"), LAYERNORM, SINUSOIDAL]},  # one class, edited after C1, C2, C4
     "attention is MyAttention of /home/me/myattention.py in 2 versions in C1, C2, C3, C4, edited between the runs"),
])
def test_a_real_confound_is_still_mixed_and_named(change, said):
    line = _summary({**CONSISTENT, **change})
    assert " — MIXED: " in line and said in line.split(" — MIXED: ")[1], line


def test_seeds_of_one_configuration_are_compared_for_a_part_only_they_hold():
    line = _summary({"c2 seed 0": CONSISTENT["c2"], "c2 seed 1": [ATTENTION, LAYERNORM], "c1": CONSISTENT["c1"]})
    assert "MIXED: rope is yours in C2 seed 0 and cipherlab's in C2 seed 1" in line, line
    assert "positional" not in line.split(" — MIXED: ")[1]  # C2 has none: not cipherlab's either
    rms = _summary({"c4 seed 0": CONSISTENT["c4"], "c4 seed 1": [ATTENTION, _part("norm", "MyRMSNorm", "8"),
                                                                  SINUSOIDAL], "c1": CONSISTENT["c1"]})
    assert "MIXED: norm (rmsnorm) is 2 different classes or versions of one in C4 seed 0, C4 seed 1" in rms, rms
    assert "layernorm" not in rms  # C1's LayerNorm is compared with no RMSNorm
