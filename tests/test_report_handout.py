"""``report``'s course-handout part (:mod:`cipherlab.analysis.handout`), on a copy of the committed
``results/assignment-cpu`` records: every handout metric of every run printed, C5's costs beside C1's with their
ratio (each expected value computed here from the JSON, not typed in), figures that fit a 12-point report's text
width, LaTeX tables with one row per run and escaped characters, and one-line errors."""

import contextlib
import io
import json
import shutil
import struct

import pytest
from pypdf import PdfReader

from cipherlab.analysis import handout
from cipherlab.runner.errors import REPO_RESULTS_DIR, run_command
from cipherlab.cli import report as report_cli
from cipherlab.cli.common import OneLineParser

RECORDS = REPO_RESULTS_DIR / "assignment-cpu"
TEXT_WIDTH_IN = 6.3  # A4 or Letter, 1-inch margins
NAMES = {"c1-seed0": "C1 seed 0", "c1-seed1": "C1 seed 1", "c2-seed0": "C2", "c3-seed0": "C3", "c4-seed0": "C4",
         "c5-seed0": "C5"}


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)


def _run(*argv: str) -> tuple[int, str]:
    """``report ARGV`` as ``python -m cipherlab`` runs it: (exit code, stdout)."""
    parser = OneLineParser(prog="cipherlab")
    report_cli.register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["report", *argv])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_command("cipherlab", args.func, args)
    return code, out.getvalue()


def _records() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(RECORDS.glob("c*-seed*.json"))}


def _plan(records: dict[str, dict]) -> dict:
    """A plan as ``plan --json`` writes it (the fields report reads), for the records' preset and sizes: its FLOPs
    made up here (measuring them takes minutes), different per configuration."""
    hyper = records["c1-seed0"]["hyperparameters"]
    sizes = {k: hyper[k] for k in ("d_model", "n_heads", "enc_layers", "dec_layers", "ffn_dim", "chunk_chars",
                                   "token_budget", "max_batch_size", "source_mode", "src_vocab", "tgt_vocab")}
    configs = [{"config": c, "params": 0, "typical_batch": {"flops": 2e11 / (1 + i)},
                "train_epoch": {"train_flops": 2.3e14 / (1 + i), "steps": 1000}}
               for i, c in enumerate(("c1", "c2", "c3", "c4", "c5"))]
    return {"estimate": True, "preset": records["c1-seed0"]["preset"], "sizes": sizes, "configs": configs}


def _tables(text: str) -> dict[str, list[list[str]]]:
    """Each printed handout table by its number: rows of cells, the header first."""
    tables, number, rows = {}, None, []
    for line in [*text.splitlines(), ""]:
        if line.startswith("Handout table "):
            number = line.split(".")[0]
        elif line.startswith("|"):
            if not set(line) <= set("|-"):
                rows.append(line.strip()[2:-2].split(" | "))
        elif rows:
            tables[number], rows = rows, []
    return tables


def _by_header(tables: dict, first: str, contains: str) -> list[list[str]]:
    found = [t for t in tables.values() if t[0][0] == first and any(contains in h for h in t[0])]
    assert len(found) >= 1, (first, contains)
    return found[0]


@pytest.fixture(scope="module")
def handout_run(tmp_path_factory):
    """``report`` on a copy of the records, with a plan, --figures and --latex: (stdout, tmp folder, plan)."""
    tmp = tmp_path_factory.mktemp("handout")
    runs = tmp / "runs"
    runs.mkdir()
    for path in RECORDS.glob("c*-seed*.json"):
        shutil.copy(path, runs / path.name)
    plan = _plan(_records())
    (tmp / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    code, out = _run(str(runs), "--out", str(tmp / "out"), "--figures", str(tmp / "figures"), "--latex",
                     str(tmp / "latex"), "--plan", str(tmp / "plan.json"))
    assert code == 0
    return out, tmp, plan


def test_stdout_holds_every_handout_metric_of_every_run_and_its_decoding(handout_run):
    out, _, _ = handout_run
    records = _records()
    tables = _tables(out)
    for set_name in ("test", "test_free"):
        decoding = records["c1-seed0"]["sets"][set_name]["decoding"]
        caption = next(line for line in out.splitlines() if line.startswith("Handout table ")
                       and f"decoded {decoding} " in line)
        table = tables[caption.split(".")[0]]
        assert table[0] == ["run", "bit acc %", "sequence acc %", "Levenshtein per line", "Levenshtein per char %",
                            "chrF", "BLEU", "ROUGE-1", "ROUGE-2", "ROUGE-L"]
        rows = {row[0]: row for row in table[1:]}
        assert sorted(rows) == sorted(NAMES.values())
        for stem, record in records.items():
            s = record["sets"][set_name]
            tokenised = record["config"] != "c5"
            expected = [f"{100 * s['bit_accuracy']:.3f}", f"{100 * s['sequence_accuracy']:.2f}",
                        f"{s['levenshtein']:.3f}", f"{100 * s['char_error_rate']:.3f}", f"{s['chrf']:.2f}",
                        *([f"{s['bleu']:.2f}", f"{s['rouge1']:.4f}", f"{s['rouge2']:.4f}", f"{s['rougeL']:.4f}"]
                          if tokenised else ["n/c"] * 4)]
            assert rows[NAMES[stem]][1:] == expected, stem
        assert "edits per reference character" in caption and "Levenshtein distance as mean edits per line" in caption


def test_stdout_sets_c5s_costs_beside_c1s_with_their_ratios(handout_run):
    out, _, plan = handout_run
    records = _records()
    tables = _tables(out)
    costs = _by_header(tables, "run", "steps/epoch")
    assert costs[0][-1] == "peak RSS (CPU) MiB"  # the records are a CPU's: peak RSS, labelled as such
    rows = {row[0]: row for row in costs[1:]}
    c1, c5 = records["c1-seed0"], records["c5-seed0"]
    flops = {c["config"]: c["typical_batch"]["flops"] for c in plan["configs"]}
    for name, r in (("C1 seed 0", c1), ("C5", c5)):
        row = dict(zip(costs[0], rows[name]))
        assert row["params"] == f"{r['params']:,}"
        assert row["train tokens/s"] == f"{r['train_tokens_per_s']:,.0f}"
        assert row["s/epoch"] == f"{r['seconds_per_epoch']:,.1f}"
        assert row["steps/epoch"] == f"{r['log'][-1]['step'] / len(r['log']):,.0f}"
        assert row["peak RSS (CPU) MiB"] == f"{r['peak_memory_bytes'] / 2**20:,.0f}"
        assert row["FLOPs/step (est.)"] == f"{flops[r['config']] / 1e9:.3g} G"
    ratios = _by_header(tables, "run", "against")
    c5_row = dict(zip(ratios[0], next(row for row in ratios[1:] if row[0] == "C5")))
    assert c5_row["against"] == "C1 seed 0"  # the baseline run of the same seed
    assert c5_row["params ×"] == f"{c5['params'] / c1['params']:.3f}"
    assert c5_row["train tokens/s ×"] == f"{c5['train_tokens_per_s'] / c1['train_tokens_per_s']:.3f}"
    assert c5_row["s/epoch ×"] == f"{c5['seconds_per_epoch'] / c1['seconds_per_epoch']:.3f}"
    assert c5_row["peak memory ×"] == f"{c5['peak_memory_bytes'] / c1['peak_memory_bytes']:.3f}"
    assert c5_row["FLOPs/step ×"] == f"{flops['c5'] / flops['c1']:.3f}"
    assert "ESTIMATES by cipherlab.analysis.plan" in out


def test_figures_are_png_and_pdf_within_the_text_width(handout_run):
    _, tmp, _ = handout_run
    stems = {p.stem for p in (tmp / "figures").iterdir()}
    assert stems == {"learning_curves", "test_metrics", "cost_ratios"}
    for stem in stems:
        box = PdfReader(tmp / "figures" / f"{stem}.pdf").pages[0].mediabox
        width, height = float(box.width) / 72, float(box.height) / 72  # points to inches
        assert width <= TEXT_WIDTH_IN + 1e-6 and 1.5 <= height <= 4.0, (stem, width, height)
        png = (tmp / "figures" / f"{stem}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        px_width, px_height = struct.unpack(">II", png[16:24])  # IHDR
        assert (px_width / 200, px_height / 200) == pytest.approx((width, height), abs=0.01)  # saved at 200 dpi
    assert handout.FONT_PT >= 9


def test_latex_tables_have_one_row_per_run_and_escape(handout_run):
    _, tmp, _ = handout_run
    files = {p.name for p in (tmp / "latex").iterdir()}
    assert files == {"metrics_test.tex", "metrics_test_free.tex", "costs.tex", "cost_ratios.tex"}
    text = (tmp / "latex" / "metrics_test.tex").read_text(encoding="utf-8")
    body = text[text.index(r"\midrule") + len(r"\midrule"):text.index(r"\bottomrule")].strip().splitlines()
    assert sorted(line.split(" & ")[0] for line in body) == sorted(NAMES.values())
    assert all(line.endswith(r" \\") and line.count(" & ") == 9 for line in body)
    assert r"\toprule" in text and r"\begin{tabular}{lrrrrrrrrr}" in text and r"acc \%" in text
    for line in text.splitlines():
        if not line.startswith("%"):  # outside the caption comment every % is escaped
            assert "%" not in line.replace(r"\%", ""), line
    assert r"\times" in (tmp / "latex" / "cost_ratios.tex").read_text(encoding="utf-8")
    table = handout.Table("t", "50% of c1_seed0 & more", ["run_name", "a & b %"], [["c1_seed0", "5%"]])
    latex = table.latex()
    assert r"% 50\% of c1\_seed0 \& more" in latex and r"c1\_seed0 & 5\% \\" in latex
    assert r"\shortstack[r]{a \&\\b \%}" in latex and r"run\_name &" in latex


def test_what_a_record_lacks_is_not_recorded_and_memory_says_what_it_is(tmp_path):
    records = _records()
    runs = tmp_path / "runs"
    runs.mkdir()
    for stem in ("c1-seed0", "c5-seed0"):
        record = records[stem]
        if stem == "c5-seed0":
            record["peak_memory_bytes"] = None
            record["sets"]["test"].pop("levenshtein")
        (runs / f"{stem}.json").write_text(json.dumps(record), encoding="utf-8")
    code, out = _run(str(runs), "--out", str(tmp_path / "out"))
    assert code == 0
    tables = _tables(out)
    metrics = _by_header(tables, "run", "Levenshtein per line")
    assert dict(zip(metrics[0], metrics[2]))["Levenshtein per line"] == "not recorded"
    costs = _by_header(tables, "run", "steps/epoch")
    c5 = dict(zip(costs[0], costs[2]))
    assert c5["peak RSS (CPU) MiB"] == "not recorded"
    assert c5["FLOPs/step (est.)"] == "not estimated (--plan)"
    ratios = _by_header(tables, "run", "against")
    assert dict(zip(ratios[0], ratios[1]))["peak memory ×"] == "not recorded"
    gpu = {**records["c1-seed0"], "device": "cuda:0"}
    assert handout.memory_kind(gpu) == "GPU max_memory_allocated"
    assert handout.memory_kind(records["c1-seed0"]) == "peak RSS (CPU)"


@pytest.mark.parametrize("case", ["plan missing", "plan not a plan", "figures in results", "latex with references"])
def test_bad_handout_options_are_one_line(case, tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(RECORDS / "c1-seed0.json", runs)
    (tmp_path / "bad.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "refs.txt").write_text("a\n", encoding="utf-8")
    argv, words = {
        "plan missing": (["--plan", str(tmp_path / "none.json")], ["none.json: no such plan file", "--json FILE"]),
        "plan not a plan": (["--plan", str(tmp_path / "bad.json")], ["--plan", "bad.json", "not a plan's --json"]),
        "figures in results": (["--figures", str(REPO_RESULTS_DIR / "smoke" / "figs")],
                               ["--figures", "committed results folder"]),
        "latex with references": (["--latex", str(tmp_path / "tex"), "--references", str(tmp_path / "refs.txt")],
                                  ["--latex", "prediction files"]),
    }[case]
    code, _ = _run(str(runs), "--out", str(tmp_path / "out"), *argv)
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, (word, err)
    assert not (REPO_RESULTS_DIR / "smoke" / "figs").exists()
