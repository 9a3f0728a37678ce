"""Training with a student's own classes: ``--part PART=FILE.py:NAME`` and ``PartsBuilder(parts)``."""

import hashlib
import json
import re
import textwrap
from unittest import mock

import pytest
import torch

import cipherlab.student.parts as parts_module
from cipherlab.__main__ import main
from cipherlab.runner.integrity import CheckpointError, load_checkpoint
from cipherlab.runner.trained import load_trained
from cipherlab.data.cipher import encrypt
from cipherlab.pipeline.codec import build_model
from cipherlab.base.config import make_config
from cipherlab.models import ModelArgs, MultiHeadAttention
from cipherlab.models.norm import make_norm
from cipherlab.student.adapters import MAX_LEN, NORM_EPS, PrefixAttention, RotaryAdapter, put_parts
from cipherlab.student.parts import (EDITED_PARTS, PartError, PartsBuilder, check_names, class_sha256, mismatch,
                                     validate_parts)
from samples import SAMPLE_LINES

TINY = ["--preset", "smoke", "--set", "max_epochs=1", "--set", "max_train_lines=40", "--set", "max_eval_lines=2",
        "--device", "cpu"]

# A student's file: attention written from scratch (no KV cache), a rotary embedding with forward only,
# a norm and a position encoding, and the usual ways of not fitting the interfaces.
STUDENT = textwrap.dedent('''
    import math
    import torch
    from torch import nn


    class MyAttention(nn.Module):
        def __init__(self, d_model, n_heads, dropout=0.1, rope=None):
            super().__init__()
            self.h, self.d, self.rope = n_heads, d_model // n_heads, rope
            self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
            self.v_proj, self.o_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
            self.drop = nn.Dropout(dropout)

        def split(self, x):
            return x.view(x.size(0), x.size(1), self.h, self.d).transpose(1, 2)

        def forward(self, query, key, value, mask=None):
            q, k, v = (self.split(p(x)) for p, x in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
            if self.rope is not None:
                q, k = self.rope(q, k)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
            if mask is not None:
                scores = scores.masked_fill(mask, -1e9)
            out = self.drop(scores.softmax(-1)) @ v
            return self.o_proj(out.transpose(1, 2).reshape(query.shape))


    class NarrowAttention(MyAttention):
        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, value, mask)[..., : query.size(-1) // 2]


    class NanAttention(MyAttention):
        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, value, mask) / 0 * 0


    class ApplyAttention(MyAttention):
        def _apply(self, out):  # the student's own step, named as nn.Module's: .to() would call it
            return self.o_proj(out)


    class OneArgAttention(nn.Module):
        def __init__(self, d_model):
            super().__init__()


    class MyRope(nn.Module):
        def __init__(self, head_dim, max_len=4096):
            super().__init__()
            angles = torch.outer(torch.arange(max_len).float(), 10000 ** (-torch.arange(0, head_dim, 2) / head_dim))
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

        def turn(self, x, offset):
            cos, sin = self.cos[offset : offset + x.size(-2)], self.sin[offset : offset + x.size(-2)]
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2)

        def forward(self, q, k, offset=0):
            return self.turn(q, offset), self.turn(k, offset)


    class MyNorm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps, self.gamma = eps, nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.gamma


    class MyPositions(nn.Module):
        def __init__(self, d_model, max_len=4096, dropout=0.1):
            super().__init__()
            self.table = nn.Parameter(torch.zeros(max_len, d_model))

        def forward(self, x, offset=0):
            return x + self.table[offset : offset + x.size(1)]
''')


def _student(folder):
    path = folder / "student.py"
    path.write_text(STUDENT, encoding="utf-8")
    return path


def _load(folder):
    """The student's module, imported as ``--part`` imports it."""
    from cipherlab.student.check import load_target
    path = _student(folder)
    return {name: load_target(f"{path}:{name}") for name in ("MyAttention", "MyRope", "MyNorm", "MyPositions")}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """c1 (smoke, one epoch on 40 lines) trained with MyAttention: (root, student file, printed, exit code)."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("parts")
    (root / "data").mkdir()
    (root / "data" / "brown_plain.txt").write_text("".join(x + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    student = _student(root)
    printed = io.StringIO()
    tried = []  # each time the student's classes are tried: once per run, whatever loads the model
    real = parts_module.validate_parts
    with contextlib.redirect_stdout(printed), mock.patch.object(
            parts_module, "validate_parts", lambda *a, **k: tried.append(a) or real(*a, **k)):
        code = main(["train", "--config", "c1", *TINY, "--data-dir", str(root / "data"), "--out", str(root / "run"),
                     "--results-dir", str(root / "results"), "--part", f"attention={student}:MyAttention"])
    assert len(tried) == 1, f"the parts were tried {len(tried)} times in one run"
    return root, student, printed.getvalue(), code


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("cipherlab: error: "), err
    return err


def test_training_with_a_part_records_it_and_decodes_only_with_it(trained, capsys):
    root, student, printed, code = trained
    assert code == 0 and "note: attention is your MyAttention" in printed
    record = {"part": "attention", "file": str(student), "class": "MyAttention",
              "sha256": hashlib.sha256(student.read_bytes()).hexdigest(),
              "class_sha256": class_sha256(_load(root)["MyAttention"])}
    assert len(record["class_sha256"]) == 64
    saved = json.loads((root / "results" / "smoke" / "c1.json").read_text())
    assert saved["parts"] == [record]
    test = saved["sets"]["test"]
    outcomes = test["exact_by_line"]  # per-line outcomes, for report's paired comparison
    assert len(outcomes) == test["lines"] and outcomes.count("1") == test["exact_lines"] == round(
        test["sequence_accuracy"] * test["lines"])
    table = (root / "results" / "smoke" / "table.md").read_text()
    assert f"Parts (--part): C1: attention = MyAttention of {student} (class sha256 {record['class_sha256'][:12]})" \
        in table
    assert load_checkpoint(root / "run" / "best.pt")["artifacts"]["parts"] == [record]
    capsys.readouterr()
    bits = encrypt("Hi there")
    assert main(["decrypt", "--checkpoint", str(root / "run" / "best.pt"), "--part",
                 f"attention={student}:MyAttention", bits]) == 0
    assert [len(line) for line in capsys.readouterr().out.splitlines()] == [len("Hi there")]
    for command in (["decrypt", "--checkpoint", str(root / "run" / "best.pt"), bits],
                    ["evaluate", "--checkpoint", str(root / "run" / "best.pt"), "--data-dir", str(root / "data")]):
        assert main(command) == 1
        assert _one_line_error(capsys) == (f"cipherlab: error: {root / 'run' / 'best.pt'}: it was trained with its "
                                           f"own attention, MyAttention of {student}; pass --part "
                                           f"attention={student}:MyAttention\n")


def test_the_doctor_diagnoses_a_part_trained_model_given_its_part(trained, capsys):
    root, student, _, _ = trained
    checkpoint = str(root / "run" / "best.pt")
    doctor = ["doctor", "--checkpoint", checkpoint, "--data-dir", str(root / "data"), "--lines", "2", "--random", "2",
              "--attention-chunks", "1"]
    capsys.readouterr()
    assert main(doctor) == 1
    assert _one_line_error(capsys).endswith(f"pass --part attention={student}:MyAttention\n")
    assert main([*doctor, "--part", f"attention={student}:MyAttention"]) == 0
    assert "cipherlab doctor" in capsys.readouterr().out


def test_a_part_trained_model_refuses_another_file_and_a_resume_without_the_part(trained, capsys, monkeypatch):
    root, student, _, _ = trained
    monkeypatch.delenv(EDITED_PARTS, raising=False)
    elsewhere = root / "elsewhere.py"  # another class of the file edited, and a comment: the class's source is the same
    elsewhere.write_text(student.read_text().replace("nn.Parameter(torch.ones(d_model))",
                                                     "nn.Parameter(torch.full((d_model,), 1.0))")
                         + "# changed after training\n")
    edited = root / "edited.py"  # MyAttention itself edited
    edited.write_text(student.read_text().replace("masked_fill(mask, -1e9)", "masked_fill(mask, float('-inf'))"))
    decrypt = ["decrypt", "--checkpoint", str(root / "run" / "best.pt"), encrypt("Hi"), "--part"]
    capsys.readouterr()
    assert main([*decrypt, f"attention={elsewhere}:MyAttention"]) == 0
    capsys.readouterr()
    assert main([*decrypt, f"attention={edited}:MyAttention"]) == 1
    err = _one_line_error(capsys)
    assert f"MyAttention in {edited} is not the source its attention was trained with" in err
    assert "the class itself was edited" in err and f"set {EDITED_PARTS}=1" in err
    monkeypatch.setenv(EDITED_PARTS, "1")  # load it anyway, as the message says
    assert main([*decrypt, f"attention={edited}:MyAttention"]) == 0
    monkeypatch.delenv(EDITED_PARTS)
    capsys.readouterr()
    assert main(["train", "--config", "c1", *TINY, "--data-dir", str(root / "data"), "--out", str(root / "run"),
                 "--results-dir", str(root / "results"), "--resume"]) == 1
    assert "last.pt: it was trained with its own attention" in _one_line_error(capsys)


def test_from_python_a_part_trained_model_loads_with_its_parts_as_an_argument(trained):
    """No ambient state: ``load_trained(path, builder=PartsBuilder(...))`` alone decides, and the same call without
    it refuses."""
    root, student, _, _ = trained
    best = root / "run" / "best.pt"
    own = _load(root)
    model, _, _ = load_trained(best, "cpu", builder=PartsBuilder({"attention": own["MyAttention"]}))
    assert all(isinstance(layer.self_attn, own["MyAttention"]) for layer in model.encoder.layers)
    assert all(isinstance(layer.self_attn.inner, own["MyAttention"]) for layer in model.decoder.layers)
    with pytest.raises(PartError, match="^" + re.escape(f"{best}: it was built with other classes in place of "
                                                         f"cipherlab's (attention: MyAttention of {student}); load "
                                                         "it with a builder= that puts those classes back")):
        load_trained(best)  # cipherlab's own model (the pipeline's): no command-line flag in its message
    with pytest.raises(PartError, match=f"^{best}: .*pass --part attention={student}:MyAttention"):
        load_trained(best, builder=PartsBuilder())  # what the commands pass without --part
    with pytest.raises(PartError, match="its attention was MyAttention of .*, not MyNorm; pass --part"):
        load_trained(best, builder=PartsBuilder({"attention": own["MyNorm"]}))
    with pytest.raises(PartError, match=f"^{best}: .*it was trained with cipherlab's own norm"):
        load_trained(best, builder=PartsBuilder({"attention": own["MyAttention"], "norm": own["MyNorm"]}))
    assert not isinstance(PartError("x"), CheckpointError)  # a part is the reader's to fix, not the file


def test_the_reference_model_has_no_student_hooks():
    """cipherlab's model takes no student classes: the adapters put them in after it is built."""
    import dataclasses
    import inspect
    import cipherlab.models.transformer as transformer
    hooks = [field.name for field in dataclasses.fields(ModelArgs) if field.name.endswith("_cls")]
    assert hooks == [] and not hasattr(transformer, "RotaryAdapter")
    assert "student" not in inspect.getsource(transformer).split('"""', 2)[2]  # past the module docstring
    assert NORM_EPS == inspect.signature(make_norm).parameters["eps"].default
    assert ModelArgs.max_len == MAX_LEN


BAD = [  # (the --part value, with {f} for the student's file; what the one-line error must say)
    ("attention={f}.missing:MyAttention", ["attention={f}.missing:MyAttention", "no such Python file"]),
    ("attention={f}:Missing", ["attention={f}:Missing", "defines no 'Missing'"]),
    ("attention={f}:OneArgAttention", ["attention={f}:OneArgAttention", "OneArgAttention(32, 4, dropout=",
                                        "TypeError"]),
    ("attention={f}:NarrowAttention", ["attention={f}:NarrowAttention",
                                       "returned shape (2, 5, 16), expected (2, 5, 32)"]),
    ("attention={f}:NanAttention", ["attention={f}:NanAttention", "returned NaN or inf"]),
    ("attn={f}:MyAttention", ["--part attn=", "unknown part 'attn'; choose one of attention, norm, positional, rope"]),
    ("attention", ["--part attention: expected PART=FILE.py:NAME"]),
    ("rope={f}:MyRope", ["rope={f}:MyRope", "c1 has no rotary embedding"]),
    ("attention={f}:ApplyAttention", ["attention={f}:ApplyAttention: ApplyAttention defines _apply, which nn.Module "
                                      "already has", "rename it"]),
]


@pytest.mark.parametrize("value, says", BAD, ids=["no file", "no class", "constructor", "shape", "nan", "unknown part",
                                                  "malformed", "unused part", "nn.Module name"])
def test_a_part_that_does_not_fit_is_one_line_before_training(tmp_path, capsys, value, says):
    student = _student(tmp_path)
    code = main(["train", "--config", "c1", *TINY, "--data-dir", str(tmp_path / "no-data"), "--out",
                 str(tmp_path / "run"), "--part", value.format(f=student)])
    err = _one_line_error(capsys)
    assert code == 1 and not (tmp_path / "run").exists()
    for text in says:
        assert text.format(f=student) in err


def test_ablate_refuses_a_part_no_configuration_has_a_place_for(tmp_path, capsys):
    student = _student(tmp_path)
    assert main(["ablate", "--configs", "c2,c5", *TINY, "--part", f"positional={student}:MyPositions"]) == 1
    assert "none of c2, c5 has a place for positional" in _one_line_error(capsys)


def _built(config, parts, **sizes):
    """What PartsBuilder does, with the sizes given rather than a codec's: cipherlab's model, then the parts."""
    check_names(parts, config)
    return put_parts(build_model(config, **sizes), parts)


def test_build_model_puts_each_part_in_its_place(tmp_path):
    own = _load(tmp_path)
    sizes = dict(vocab_sizes=(40, 50), pad_id=0)
    c1 = make_config("c1", "smoke", recipe="notes")
    model = _built(c1, {"attention": own["MyAttention"], "norm": own["MyNorm"], "positional": own["MyPositions"]},
                   **sizes)
    assert all(isinstance(layer.self_attn, own["MyAttention"]) for layer in model.encoder.layers)
    assert all(isinstance(layer.self_attn, PrefixAttention) and isinstance(layer.self_attn.inner, own["MyAttention"])
               for layer in model.decoder.layers)  # the decoder's keeps the prefix, as a KV cache would
    assert all(type(layer.cross_attn) is MultiHeadAttention for layer in model.decoder.layers)
    norms = [m for m in model.modules() if isinstance(m, own["MyNorm"])]
    assert len(norms) == 2 * len(model.encoder.layers) + 3 * len(model.decoder.layers) + 2
    assert isinstance(model.pos_enc, own["MyPositions"])
    c2 = _built(make_config("c2", "smoke", recipe="notes"), {"rope": own["MyRope"]}, **sizes)
    rope = c2.encoder.layers[0].self_attn.rope
    assert isinstance(rope, RotaryAdapter) and isinstance(rope.inner, own["MyRope"])
    assert c2.decoder.layers[0].cross_attn.rope is rope
    assert not any(isinstance(m, own["MyAttention"]) for m in build_model(c1, **sizes).modules())


@pytest.mark.parametrize("config, part", [("c1", "attention"), ("c2", "rope")])
def test_decoding_step_by_step_with_own_parts_gives_the_full_pass_logits(tmp_path, config, part):
    """The student's attention gets no KV cache: each step runs it over the prefix again, which must agree."""
    own = _load(tmp_path)
    parts = {"attention": own["MyAttention"]} | ({"rope": own["MyRope"]} if part == "rope" else {})
    torch.manual_seed(0)
    model = _built(make_config(config, "smoke", recipe="notes"), parts, vocab_sizes=(40, 50), pad_id=0).eval()
    src, tgt = torch.randint(3, 40, (2, 7)), torch.randint(3, 50, (2, 6))
    with torch.no_grad():
        full = model(src, tgt)
        state = model.begin_decoding(src)
        steps = torch.stack([model.decode_step(state, tgt[:, t]) for t in range(tgt.size(1))], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_python_api_errors_name_the_part(tmp_path):
    own = _load(tmp_path)
    c1 = make_config("c1", "smoke", recipe="notes")
    with pytest.raises(PartError, match="unknown part 'attn'"):
        validate_parts({"attn": own["MyAttention"]}, c1)
    with pytest.raises(PartError, match=r"rope=.*student.py:MyRope: c1 has no rotary embedding"):
        PartsBuilder({"rope": own["MyRope"]})(c1, None)
    with pytest.raises(PartError, match="not a subclass of torch.nn.Module"):
        validate_parts({"norm": dict}, c1)
    validate_parts({"attention": own["MyAttention"], "norm": own["MyNorm"]}, c1)  # fits: no error


def test_a_part_setting_a_name_nn_module_has_is_refused_before_training(tmp_path):
    """``self.apply = ...`` set in __init__: the trial's module is looked at, and one line names the class and name."""
    from torch import nn
    own = _load(tmp_path)

    class ShadowingNorm(own["MyNorm"]):
        def __init__(self, d_model, eps=1e-5):
            super().__init__(d_model, eps)
            self.apply = nn.Identity()

    with pytest.raises(PartError, match=r"norm=.*ShadowingNorm: ShadowingNorm defines apply, which nn.Module "
                                        r"already has.*rename it \(e.g. apply_step\)$"):
        validate_parts({"norm": ShadowingNorm}, make_config("c1", "smoke", recipe="notes"))


def test_a_record_without_the_class_hash_compares_the_files():
    """Checkpoints written before class_sha256 was recorded: the file's sha256 decides, and the line says how
    to load it anyway."""
    then = {"part": "norm", "file": "a.py", "class": "MyNorm", "sha256": "1" * 64}
    now = {**then, "sha256": "2" * 64, "class_sha256": "3" * 64}
    problem = mismatch([then], [now])
    assert "a.py differs from the file its norm MyNorm was trained in" in problem and EDITED_PARTS in problem
    assert mismatch([{**then, "class_sha256": "3" * 64}], [now]) is None  # the class's own source agrees


TRAINED_AS = {"rope": ("rope", "c2"), "layernorm": ("norm", "c1"), "rmsnorm": ("norm", "c4"), "mha": ("attention", "c1"),
              "gqa": ("attention", "c3")}


@pytest.mark.parametrize("part, cls, words", [(p, obj, words) for p, obj, name, words in __import__(
    "student_mistakes").ONE_BUG if name == "module names"], ids=lambda v: getattr(v, "__name__", None))
def test_student_mistakes_overriding_nn_module_names_never_reach_training(part, cls, words):
    """tests/student_mistakes.py's classes that ``check`` refuses for a name nn.Module has, refused by --part too."""
    name, config = TRAINED_AS[part]
    with pytest.raises(PartError) as refused:
        validate_parts({name: cls}, make_config(config, "smoke", recipe="notes"))
    message = str(refused.value)
    assert f"{cls.__name__}: {cls.__name__} defines {words}, which nn.Module already has" in message
    assert "\n" not in message
