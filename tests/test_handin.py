"""``python -m cipherlab check handin PATH``: a course hand-in, written here as a student would (small, from-scratch
modules in the handout's layout, a report made with pypdf), is checked item by item: every fault of a faulty one
is named in one run, a correct one passes as a folder and as its zip, and the student's folder is left as it was."""

import inspect
import sys
import zipfile
from pathlib import Path

import pytest

import student_mistakes as mistakes
from cipherlab.__main__ import main
from cipherlab.student import handin

pypdf = pytest.importorskip("pypdf")


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


# --------------------------------------------------------------------------- a hand-in, as a student writes it

ATTENTION = '''"""Attention, multi-head attention and the feed-forward block, written from scratch."""
import math

import torch
from torch import nn


class ScaledDotProductAttention(nn.Module):
    def forward(self, q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        if mask is not None:  # a query that may read no key gets zeros
            weights = weights.masked_fill(mask.all(-1, keepdim=True), 0.0)
        return weights @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.1, rope=None):  # dropout=: train passes it
        super().__init__()
        self.h, self.d = n_heads, d_model // n_heads
        self.rope = rope
        self.attend = ScaledDotProductAttention()
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.o_proj = nn.Linear(d_model, d_model)

    def split(self, x):
        return x.view(x.size(0), x.size(1), self.h, self.d).transpose(1, 2)

    def forward(self, query, key, value, mask=None):
        q, k, v = self.split(self.q_proj(query)), self.split(self.k_proj(key)), self.split(self.v_proj(value))
        if self.rope is not None:
            q, k = self.rope(q, k)
        out = self.attend(q, k, v, mask)
        return self.o_proj(out.transpose(1, 2).reshape(query.size(0), query.size(1), -1))


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.net(x)
'''

POSITIONAL = '''"""Sinusoidal positions and RoPE."""
import torch
from torch import nn


def frequencies(dim):
    return 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        angles = torch.outer(torch.arange(max_len).float(), frequencies(d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2], table[:, 1::2] = angles.sin(), angles.cos()
        self.register_buffer("table", table, persistent=False)

    def forward(self, x, offset=0):
        return self.drop(x + self.table[offset:offset + x.size(1)].to(x.dtype))


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, max_len=512):
        super().__init__()
        angles = torch.outer(torch.arange(max_len).float(), frequencies(head_dim))
        self.register_buffer("cos", torch.cat([angles, angles], -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat([angles, angles], -1).sin(), persistent=False)

    def rotate(self, x, start):
        cos, sin = self.cos[start:start + x.size(-2)], self.sin[start:start + x.size(-2)]
        x1, x2 = x.float().chunk(2, dim=-1)
        return (x.float() * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)

    def forward(self, q, k, offset=0):
        return self.rotate(q, offset), self.rotate(k, offset)
'''

# the norms are tests/student_mistakes.py's right baselines, MyLayerNorm and MyRMSNorm, as a student wrote them
NORM = ('"""LayerNorm, RMSNorm and a Pre-LN sublayer."""\nimport torch\nfrom torch import nn\n\n\n'
        + inspect.getsource(mistakes.MyLayerNorm) + "\n\n" + inspect.getsource(mistakes.MyRMSNorm) + """

class PreLNSublayer(nn.Module):
    def __init__(self, d_model, sublayer):
        super().__init__()
        self.norm, self.sublayer = MyRMSNorm(d_model), sublayer

    def forward(self, x):
        return x + self.sublayer(self.norm(x))
""")

BLT = '''"""The BLT's local encoder and decoder."""
from torch import nn

from src.models.norm import MyRMSNorm


class LocalEncoder(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.embed, self.norm = nn.Embedding(259, d_model), MyRMSNorm(d_model)

    def forward(self, bytes_):
        return self.norm(self.embed(bytes_))


class LocalDecoder(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.out = nn.Linear(d_model, 259)

    def forward(self, x):
        return self.out(x)
'''

FILES = {
    "src/models/attention.py": ATTENTION,
    "src/models/positional.py": POSITIONAL,
    "src/models/norm.py": NORM,
    "src/models/blt.py": BLT,
    "src/dataset.py": "import torch\n\n\nclass CipherDataset(torch.utils.data.Dataset):\n    pass\n",
    "src/train.py": "import wandb\n\n\ndef train(model):\n    wandb.init(project='cipher')\n",
    "src/utils.py": "def bit_accuracy(pred, gold):\n    return sum(p == g for p, g in zip(pred, gold)) / len(gold)\n",
    "outputs/train_log.txt": "step 1 loss 5.5\n",
    "README.md": "# Assignment 1\n\npip install -r requirements.txt\n\nModel: https://huggingface.co/student/xor-cipher\n"
                 "Runs: https://wandb.ai/student/xor-cipher/runs/abc123\n",
}

FORBIDDEN_CLASS = '''

class CrossAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
'''


def write_pdf(path: Path, pages: int) -> None:
    writer = pypdf.PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)  # US Letter, in points
    with open(path, "wb") as f:
        writer.write(f)


def write_handin(folder: Path, *, pages: int = 4, faulty: bool = False) -> Path:
    """The hand-in in ``folder``; ``faulty``: nn.MultiheadAttention in attention.py, no W&B link in the README and
    no src/utils.py (and ``pages`` = 7 for a report too long)."""
    files = dict(FILES)
    if faulty:
        files["src/models/attention.py"] += FORBIDDEN_CLASS
        files["README.md"] = files["README.md"].replace("Runs: https://wandb.ai/student/xor-cipher/runs/abc123\n", "")
        del files["src/utils.py"]
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    write_pdf(folder / "Report.pdf", pages)
    return folder


def zip_folder(folder: Path, zip_path: Path, wrapper: str | None = None) -> Path:
    with zipfile.ZipFile(zip_path, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                rel = path.relative_to(folder).as_posix()
                archive.write(path, f"{wrapper}/{rel}" if wrapper else rel)
    return zip_path


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder): what must not change."""
    return {p.relative_to(folder).as_posix(): None if p.is_dir() else p.read_bytes() for p in folder.rglob("*")}


def table(out: str) -> dict[str, list[str]]:
    """The printed rows by status: ``{"FAIL": [line, ...], ...}``."""
    rows: dict[str, list[str]] = {"PASS": [], "WARN": [], "FAIL": []}
    for line in out.splitlines():
        status = line.strip()[:4]
        if line.startswith("  ") and status in rows:
            rows[status].append(line.strip())
    return rows


ROLL = "2021CS10123"


@pytest.fixture(scope="module")
def handins(tmp_path_factory):
    root = tmp_path_factory.mktemp("handins")
    good = write_handin(root / f"{ROLL}_assignment1")
    bad = write_handin(root / "faulty", pages=7, faulty=True)
    (root / "faulty/src/models/__init__.py").write_text("", encoding="utf-8")
    return good, bad


# --------------------------------------------------------------------------- the tests

def test_a_faulty_handin_gets_every_fault_named_in_one_run(handins, capsys):
    _, bad = handins
    before = snapshot(bad)
    assert main(["check", "handin", str(bad)]) == 1
    out = capsys.readouterr().out
    fails = table(out)["FAIL"]
    line = next(i for i, text in enumerate((ATTENTION + FORBIDDEN_CLASS).splitlines(), 1) if "nn.Multihead" in text)
    assert any(f"src/models/attention.py:{line}" in row and "nn.MultiheadAttention" in row for row in fails), out
    assert any("Report.pdf: pages" in row and "7 pages" in row and "at most 6" in row for row in fails), out
    assert any("README.md: W&B link" in row and "https://wandb.ai/" in row for row in fails), out
    assert any("src/utils.py" in row and "missing" in row for row in fails), out
    assert len(fails) == 4, out  # nothing else: the Hugging Face link, the parts' checks, the layout pass
    assert out.rstrip().splitlines()[-1].endswith("4 FAIL; fix each FAIL, then run `python -m cipherlab check "
                                                  "handin` again"), out
    assert snapshot(bad) == before


def test_a_correct_handin_passes_as_a_folder(handins, capsys):
    good, _ = handins
    before = snapshot(good)
    assert main(["check", "handin", str(good)]) == 0
    out = capsys.readouterr().out
    rows = table(out)
    assert not rows["FAIL"], out
    for name, part in [("norm.py:MyLayerNorm", "layernorm"), ("norm.py:MyRMSNorm", "rmsnorm"),
                       ("positional.py:SinusoidalPositionalEncoding", "sinusoidal"),
                       ("positional.py:RotaryEmbedding", "rope"), ("attention.py:MultiHeadAttention", "mha"),
                       ("attention.py:ScaledDotProductAttention", "attention")]:
        assert any(f"src/models/{name}" in row and f"{part}:" in row and "checks pass" in row
                   for row in rows["PASS"]), (name, out)
    assert any("FeedForward" in row and "python -m cipherlab check PART" in row for row in rows["WARN"]), out
    assert any(row.startswith("PASS  zip name") for row in rows["PASS"]), out
    assert snapshot(good) == before  # no __pycache__, nothing rewritten
    assert not {"src", "src.models", "src.models.norm"} & set(sys.modules)  # the next hand-in imports its own
    assert "no FAIL: ready to hand in" in out


def test_a_correct_handin_passes_as_its_zip_and_a_misnamed_zip_fails(handins, tmp_path, capsys):
    good, _ = handins
    named = zip_folder(good, tmp_path / f"{ROLL}_assignment1.zip", wrapper=good.name)  # one wrapper folder is fine
    assert main(["check", "handin", str(named)]) == 0
    rows = table(capsys.readouterr().out)
    assert not rows["FAIL"] and rows["PASS"][0].split() == ["PASS", "zip", "name", f"{ROLL}_assignment1.zip"]
    misnamed = zip_folder(good, tmp_path / "assignment1_final.zip")
    assert main(["check", "handin", str(misnamed)]) == 1
    fails = table(capsys.readouterr().out)["FAIL"]
    assert len(fails) == 1 and "zip name" in fails[0] and "<rollnumber>_assignment1.zip" in fails[0], fails
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2021CS10123_assignment1.zip", "assignment1_final.zip"]


def _one_line(err: str, words: str) -> None:
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("cipherlab: error: ") and words in err, err


def test_a_missing_path_or_a_bad_zip_is_one_line(tmp_path, capsys):
    assert main(["check", "handin", str(tmp_path / "nowhere")]) == 1
    _one_line(capsys.readouterr().err, f"{tmp_path / 'nowhere'}: no such folder or zip")
    not_a_zip = tmp_path / f"{ROLL}_assignment1.zip"
    not_a_zip.write_text("not a zip", encoding="utf-8")
    assert main(["check", "handin", str(not_a_zip)]) == 1
    _one_line(capsys.readouterr().err, f"{not_a_zip}: not a folder nor a readable zip")
    climbing = tmp_path / "climbing.zip"
    with zipfile.ZipFile(climbing, "w") as archive:
        archive.writestr("../evil.py", "print('outside')\n")
    assert main(["check", "handin", str(climbing)]) == 1
    _one_line(capsys.readouterr().err, "member '../evil.py' climbs out of the folder")
    assert not (tmp_path.parent / "evil.py").exists()


def test_the_source_scan_names_each_use_at_its_line(tmp_path):
    source = ("import torch.nn.functional as F\n"
              "from torch import nn\n"
              "from cipherlab.models.norm import RMSNorm\n"
              "# nn.Transformer in a comment is no use\n"
              "layer = nn.TransformerEncoderLayer(16, 2)\n"
              "out = F.scaled_dot_product_attention(q, k, v)\n"
              "mine = self.Transformer\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text(source, encoding="utf-8")
    rows = handin._source_rows(tmp_path)
    seen = {(row.status, row.item) for row in rows}
    assert seen == {("FAIL", "src/model.py:5"), ("WARN", "src/model.py:6"), ("FAIL", "src/model.py:3")}, rows


def test_class_names_match_parts_conservatively():
    assert handin.part_for("RMSNorm") == ["rmsnorm"] and handin.part_for("MyLayerNorm") == ["layernorm"]
    assert handin.part_for("RotaryEmbedding") == ["rope"] and handin.part_for("RoPE") == ["rope"]
    assert handin.part_for("GroupedQueryAttention") == ["gqa"] and handin.part_for("GQAMultiHead") == ["gqa"]
    assert handin.part_for("MultiHeadAttention") == ["mha"] and handin.part_for("Attention") == ["attention"]
    assert handin.part_for("PropertyHead") == [] and handin.part_for("PreLNBlock") == []
    assert handin.part_for("FeedForward") == [] and handin.part_for("CrossAttention") == []
    assert handin.part_for("RotaryMultiHeadAttention") == ["rope", "mha"]  # two parts: checked by hand


def test_without_pypdf_the_report_row_says_what_to_install(tmp_path, monkeypatch):
    write_pdf(tmp_path / "Report.pdf", 2)
    monkeypatch.setitem(sys.modules, "pypdf", None)  # import pypdf raises ImportError
    [row] = handin._report_rows(tmp_path)
    assert row.status == "WARN" and "pip install 'cipherlab[handin]'" in row.detail
