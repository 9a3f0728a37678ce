"""``check``'s backward pass (issue 52, item 1): each part's gradients against the reference's with the same weights
and inputs. tests/student_mistakes.py's autograd slips (statistics under torch.no_grad(), an in-place /=, a gain
registered as a buffer, a gain used through .data, detached attention weights, detached keys) fail the 'gradients'
check and no other; cipherlab's own parts and the valid classes pass it (tests/test_check.py and
tests/test_check_stress.py run those whole)."""

import pytest

import student_mistakes as mistakes
from cipherlab.__main__ import main
from cipherlab.models.attention import MultiHeadAttention, ScaledDotProductAttention
from cipherlab.models.blt import PatchPooling
from cipherlab.models.norm import LayerNorm, RMSNorm
from cipherlab.models.positional import RotaryPositionalEmbedding, SinusoidalPositionalEncoding
from cipherlab.student import check

AUTOGRAD_SLIPS = [(part, obj) for part, obj, name, _ in mistakes.ONE_BUG if name == "gradients"]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)


def test_the_autograd_slips_are_listed():
    assert len(AUTOGRAD_SLIPS) == 7 and {part for part, _ in AUTOGRAD_SLIPS} == {"layernorm", "rmsnorm", "attention",
                                                                                  "mha", "gqa"}


@pytest.mark.parametrize("part, obj", AUTOGRAD_SLIPS, ids=[f"{p}-{o.__name__}" for p, o in AUTOGRAD_SLIPS])
def test_an_autograd_slip_fails_the_gradients_check_alone(part, obj):
    """Their outputs are right, so every forward check passes: only the backward shows the slip (a gain that is a
    buffer also cannot be copied into the reference, which 'reference' says in the same words)."""
    report = check.PARTS[part](obj)
    failing = [f.name for f in report.findings if not f.passed]
    buffers = ["parameters", "reference", "gradients"]  # no parameter at all: 'parameters' names the buffers
    assert failing == (buffers if obj is mistakes.LayerNormBufferWeights else ["gradients"]), str(report)
    if obj is mistakes.LayerNormBufferWeights:
        assert "`weight` is a buffer" in report["reference"].message and "name it gamma" not in str(report)


@pytest.mark.parametrize("part, obj", [
    ("attention", ScaledDotProductAttention), ("mha", MultiHeadAttention), ("layernorm", LayerNorm),
    ("rmsnorm", RMSNorm), ("sinusoidal", SinusoidalPositionalEncoding), ("rope", RotaryPositionalEmbedding),
    ("pooling", PatchPooling)], ids=lambda v: getattr(v, "__name__", v))
def test_cipherlabs_parts_compare_every_gradient(part, obj):
    message = check.PARTS[part](obj)["gradients"]
    assert message.passed and "agree with the reference's" in message.message, message


def test_a_wrong_forward_is_not_blamed_on_the_backward():
    """Where the outputs differ, 'reference' names the bug; the gradients are not compared, and say so."""
    finding = check.norm(mistakes.CentredRMSNorm, "rmsnorm")["gradients"]
    assert finding.passed and "only where the outputs agree" in finding.message


def test_an_unused_projection_is_named_as_unused():
    message = check.multi_head(mistakes.MHANoOutputProjection, "mha")["gradients"].message
    assert message.startswith("`o_proj.weight` gets no gradient: it is never used"), message


def test_an_in_place_division_names_the_students_line_through_the_command(tmp_path, capsys):
    path = tmp_path / "my_norm.py"
    path.write_text("import torch\nfrom torch import nn\n\n\nclass Norm(nn.Module):\n"
                    "    def __init__(self, d, eps=1e-5):\n        super().__init__()\n"
                    "        self.eps, self.gamma = eps, nn.Parameter(torch.ones(d))\n\n"
                    "    def forward(self, x):\n        rms = x.pow(2).mean(-1, keepdim=True)\n"
                    "        x /= torch.sqrt(rms + self.eps)\n        return x * self.gamma\n")
    assert main(["check", "rmsnorm", f"{path}:Norm"]) == 1
    captured = capsys.readouterr()
    line = next(line for line in captured.out.splitlines() if "gradients:" in line)
    assert line.startswith("  FAIL  gradients: the backward pass raised RuntimeError: a tensor autograd saved")
    assert "line 11 of my_norm.py (`rms = x.pow(2).mean(-1, keepdim=True)`)" in line, line
    assert "Traceback" not in captured.out + captured.err and "a bug in cipherlab" not in captured.out + captured.err
