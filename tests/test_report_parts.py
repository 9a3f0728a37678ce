"""``report`` on runs trained with a student's own parts (``--part``): the inputs table says whose parts are in
which run and flags a folder that mixes them with cipherlab's own; a table names each run's class, file and
hashes (issue 37)."""

import json

from cipherlab.analysis import report

from cipherlab.analysis import ablation

NOTES = ablation.REPO_RESULTS_DIR / "notes" / "cpu"


def _runs(tmp_path, parts_of):
    """Copies of the committed notes records (outcomes per line added), with ``parts_of[name]`` as their parts."""
    runs = tmp_path / "runs"
    runs.mkdir(parents=True)
    for name in ("c1", "c2", "c3", "c4", "c5"):
        record = json.loads((NOTES / f"{name}.json").read_text(encoding="utf-8"))
        record["sets"]["test"].update(lines=4, exact_by_line="1101" if name == "c1" else "0101")
        if parts_of.get(name):
            record["parts"] = parts_of[name]
        (runs / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
    return runs


def _mine(cls="MyAttention", digest="a" * 64):
    return [{"part": "attention", "file": "/home/me/my_attention.py", "class": cls, "sha256": "f" * 64,
             "class_sha256": digest}]


def test_a_folder_mixing_own_and_cipherlabs_parts_says_so_and_names_each_runs_parts(tmp_path):
    built = report.build_report(_runs(tmp_path, {name: _mine() for name in ("c1", "c2", "c3", "c4")}))
    inputs = dict(built.inputs)
    assert inputs["parts"].startswith("attention: yours in C1, C2, C3, C4, cipherlab's in C5 — MIXED: attention is "
                                      "yours in C1, C2, C3, C4 and cipherlab's in C5"), inputs["parts"]
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
    from cipherlab.pipeline.evaluate import write_table
    runs = _runs(tmp_path, {name: _mine() for name in ("c1", "c2")})
    table = write_table(runs)[0].read_text(encoding="utf-8")
    assert ("Parts (--part): C1: attention = MyAttention of /home/me/my_attention.py (class sha256 aaaaaaaaaaaa); "
            "C2: attention = MyAttention") in table and "C3: cipherlab's own" in table
    assert "Mixed: C1, C2 use your parts, C3, C4, C5 cipherlab's own" in table
