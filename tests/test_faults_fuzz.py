"""Valid containers with damaged contents (issue 40): a ``.safetensors`` export and a ``best.pt`` that their
readers open without complaint, but whose metadata, tensors, pickle or records were changed afterwards.

Every case, through :func:`load_trained` and the ``decrypt`` (or ``evaluate``) command, ends in one clean line
naming the file (a :class:`CheckpointError`; exit 1, one line on stderr, no traceback, no "unexpected ... (a
bug in cipherlab)") -- or, where the change left the model as it was, the same model and the same decryption.
Never a different model without a word.

Each fault class is one ``kind`` below; Hypothesis draws where and how. ``crafted``: the checksums are made
again to fit the change (a file changed on purpose); such a file may load as the other model it now is, but
must not crash. Before: a checksum stored as a number was a TypeError; an export whose metadata was not JSON, or
lacked its identity, a JSONDecodeError or KeyError ("a bug in cipherlab"); an identity that is not an object
crashed ``evaluate``; ``n_heads`` 0 a ZeroDivisionError; a non-tensor in the model an AttributeError; a weight
of another dtype or of NaN loaded silently; a pickle that calls code printed torch's warning as a second line.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import save_file

from cipherlab.__main__ import main
from cipherlab.data.cipher import encrypt
from cipherlab.runner.integrity import CheckpointError, export_sha256
from cipherlab.runner.trained import load_trained, read_payload
from cipherlab.pipeline.checkpoint import payload_sha256, payload_tensors, tensors_sha256
from test_faults_checksum import tiny  # noqa: F401 - the module fixture: one smoke epoch of C1 and its export

ROOT = Path(__file__).resolve().parents[1]
OTHER_MODELS = [ROOT / "results" / "checkpoints" / f"{name}.safetensors" for name in ("c2", "c5")] + [
    ROOT / "results" / "aligned" / "c1.safetensors"]  # read only
BITS = encrypt("a plain line")
FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False, width=32),
                   st.text(max_size=8), st.lists(st.integers(0, 9), max_size=3),
                   st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2))
DTYPES = [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.uint8]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


@pytest.fixture(scope="module")
def reference(tiny):  # noqa: F811
    """What the intact files hold and decrypt to."""
    with safe_open(str(tiny["export"]), framework="pt") as f:
        meta, tensors = dict(f.metadata()), {key: f.get_tensor(key) for key in f.keys()}
    payload = torch.load(tiny["best"], map_location="cpu", weights_only=True)
    outputs = set()
    for path in (tiny["export"], tiny["best"]):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main(["decrypt", "--checkpoint", str(path), "--device", "cpu", BITS]) == 0
        outputs.add(out.getvalue())
    assert len(outputs) == 1  # the export decrypts as its checkpoint does
    with zipfile.ZipFile(tiny["best"]) as z:
        records = {info.filename: z.read(info) for info in z.infolist()}
    return _Reference({"meta": meta, "tensors": tensors, "payload": payload, "records": records, "output": outputs.pop(),
            "model": read_payload(tiny["export"]), "data": tiny["root"] / "data"})


class _Reference(dict):
    def __repr__(self) -> str:  # Hypothesis prints a failing example's arguments: not every weight
        return "reference"


def _judge(path: Path, reference: dict, capsys, *, crafted: bool, command: str = "decrypt") -> None:
    """One clean line naming ``path``; or, unless ``crafted``, the intact model, decrypting as it did."""
    capsys.readouterr()
    try:
        load_trained(path, "cpu")
        refused = None
    except CheckpointError as e:
        refused = str(e)
    capsys.readouterr()
    argv = ["decrypt", "--checkpoint", str(path), "--device", "cpu", BITS] if command == "decrypt" else [
        "evaluate", "--checkpoint", str(path), "--device", "cpu", "--data-dir", str(reference["data"])]
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "unexpected" not in err and "a bug in cipherlab" not in err, err
    if refused is not None or code != 0:
        assert refused is None or (str(path) in refused and "\n" not in refused), refused
        assert code == 1 and out == "", (code, out)
        assert err.startswith("cipherlab: error: ") and len(err.splitlines()) == 1 and str(path) in err, err
        assert refused is not None or crafted, err  # refused only after loading (e.g. its data): a crafted file
        return
    if not crafted:  # loaded although damaged: it must be the very model it was
        got, want = read_payload(path), reference["model"]
        assert json.dumps(got["config"]) == json.dumps(want["config"]) and got["artifacts"] == want["artifacts"]
        assert got["model"].keys() == want["model"].keys()
        assert all(torch.equal(got["model"][k], want["model"][k]) and got["model"][k].dtype == want["model"][k].dtype
                   for k in want["model"])
        if command == "decrypt":
            assert out == reference["output"]


# --------------------------------------------------------------------------- (a) the .safetensors export


def _resum(meta: dict, tensors: dict) -> None:
    """Make both checksums fit the changed file again (a crafted file)."""
    meta["sha256"] = tensors_sha256(tensors)
    meta["model_sha256"] = export_sha256(meta, meta["sha256"])


def _flip(t: torch.Tensor, index: int, mask: int) -> torch.Tensor:
    raw = t.detach().clone().contiguous().reshape(-1).view(torch.uint8)
    raw[index % raw.numel()] ^= mask
    return raw.view(t.dtype).reshape(t.shape)


def _reshaped(t: torch.Tensor, how: str) -> torch.Tensor:
    if how == "flatten":
        return t.reshape(-1) if t.dim() > 1 else t.unsqueeze(0)
    if how == "unsqueeze":
        return t.unsqueeze(0)
    if how == "cut":
        return t[:-1] if t.shape[0] > 1 else torch.cat([t, t])
    return torch.cat([t, t[:1]])  # "grow"


def _export_case(kind: str, data, meta: dict, tensors: dict) -> tuple[dict, dict]:
    """``meta`` and ``tensors`` with one ``kind`` of damage, drawn from ``data``."""
    names = sorted(tensors)
    name = data.draw(st.sampled_from(names), label="tensor")
    if kind == "metadata JSON value":
        part = data.draw(st.sampled_from(["config", "artifacts", "identity"]), label="part")
        values = json.loads(meta[part])
        key = data.draw(st.sampled_from(sorted(values)), label="key")
        new = data.draw(VALUES.filter(lambda v: v != values[key]), label="value")
        meta[part] = json.dumps({**values, key: new})
    elif kind == "tokenizer value":
        artifacts = json.loads(meta["artifacts"])
        which = data.draw(st.sampled_from(sorted(artifacts)), label="tokenizer")
        tokenizer = json.loads(artifacts[which])
        key = data.draw(st.sampled_from(sorted(tokenizer)), label="key")
        tokenizer[key] = data.draw(VALUES.filter(lambda v: v != tokenizer[key]), label="value")
        meta["artifacts"] = json.dumps({**artifacts, which: json.dumps(tokenizer)})
    elif kind == "metadata entry":
        key = data.draw(st.sampled_from(sorted(meta) + ["extra"]), label="entry")
        how = data.draw(st.sampled_from(["drop", "text", "JSON"]), label="how")
        if how == "drop" and key in meta:
            del meta[key]
        else:
            text = st.text(max_size=12) if how == "text" else VALUES.map(json.dumps)
            meta[key] = data.draw(text.filter(lambda v: v != meta.get(key)), label="text")
    elif kind == "tensor dropped":
        del tensors[name]
    elif kind == "tensor renamed":
        new = data.draw(st.text("abcdefgh._", min_size=1, max_size=10).map(lambda s: f"model.{s}").filter(
            lambda s: s not in tensors), label="name")
        tensors[new] = tensors.pop(name)
    elif kind == "tensor added":
        new = data.draw(st.sampled_from(["model.", "artifacts.", ""]), label="group") + data.draw(
            st.text("abcdefgh._", min_size=1, max_size=10), label="name")
        tensors[new] = torch.zeros(data.draw(st.integers(0, 4), label="size"))
    elif kind == "tensor dtype":
        tensors[name] = tensors[name].to(data.draw(st.sampled_from(DTYPES), label="dtype"))
    elif kind == "tensor shape":
        tensors[name] = _reshaped(tensors[name], data.draw(st.sampled_from(["flatten", "unsqueeze", "cut", "grow"])))
    elif kind == "byte flipped in a tensor":
        tensors[name] = _flip(tensors[name], data.draw(st.integers(0, 10**6), label="byte"),
                              data.draw(st.integers(1, 255), label="mask"))
    elif kind == "NaN or infinity in a weight":
        t = tensors[name].clone()
        t.reshape(-1)[data.draw(st.integers(0, 10**6)) % t.numel()] = data.draw(
            st.sampled_from([float("nan"), float("inf"), -float("inf")]), label="value")
        tensors[name] = t
    elif kind == "another model's metadata":
        with safe_open(str(data.draw(st.sampled_from(OTHER_MODELS), label="model")), framework="pt") as f:
            meta.clear()
            meta.update(f.metadata())
    elif kind == "another model's tensors":
        with safe_open(str(data.draw(st.sampled_from(OTHER_MODELS), label="model")), framework="pt") as f:
            tensors.clear()
            tensors.update({key: f.get_tensor(key) for key in f.keys()})
    return meta, tensors


# Caught by what the file says of itself, even when both checksums were made again to fit the change.
CAUGHT_CRAFTED = {"tensor dropped", "tensor renamed", "tensor dtype", "tensor shape", "NaN or infinity in a weight",
                  "another model's tensors"}
EXPORT_KINDS = ["metadata JSON value", "tokenizer value", "metadata entry", "tensor dropped", "tensor renamed",
                "tensor added", "tensor dtype", "tensor shape", "byte flipped in a tensor", "NaN or infinity in a weight",
                "another model's metadata", "another model's tensors"]


@pytest.mark.parametrize("kind", EXPORT_KINDS)
@settings(FUZZ, max_examples=6)
@given(data=st.data(), crafted=st.booleans())
def test_a_damaged_export_is_refused_in_one_line(kind, data, crafted, reference, tmp_path, capsys):
    meta, tensors = _export_case(kind, data, dict(reference["meta"]), dict(reference["tensors"]))
    if crafted:
        _resum(meta, tensors)
    path = tmp_path / "c1.safetensors"
    save_file({key: t.contiguous() for key, t in tensors.items()}, str(path), metadata=meta)
    _judge(path, reference, capsys, crafted=crafted and kind not in CAUGHT_CRAFTED)


@FUZZ
@given(data=st.data(), kind=st.sampled_from(["metadata JSON value", "tokenizer value", "metadata entry"]))
def test_a_crafted_export_never_crashes_evaluate(data, kind, reference, tmp_path, capsys):
    """With both checksums made to fit: the file loads as another model, or is refused; evaluate goes on to the data."""
    meta, tensors = _export_case(kind, data, dict(reference["meta"]), dict(reference["tensors"]))
    _resum(meta, tensors)
    path = tmp_path / "c1.safetensors"
    save_file({key: t.contiguous() for key, t in tensors.items()}, str(path), metadata=meta)
    _judge(path, reference, capsys, crafted=True, command="evaluate")


# --------------------------------------------------------------------------- (b) best.pt: the payload


def _places(value, prefix=()) -> list[tuple]:
    """Every place (a path of keys) in the payload's nested dicts."""
    found = []
    for key, item in value.items():
        found.append((*prefix, key))
        if isinstance(item, dict):
            found += _places(item, (*prefix, key))
    return found


def _at(payload: dict, place: tuple) -> tuple[dict, object]:
    for key in place[:-1]:
        payload = payload[key]
    return payload, place[-1]


def _payload_case(kind: str, data, payload: dict):
    places = _places(payload)
    if kind == "value changed":
        place = data.draw(st.sampled_from([p for p in places if not isinstance(_at(payload, p)[0][p[-1]], (dict, torch.Tensor))]))
        parent, key = _at(payload, place)
        parent[key] = data.draw(VALUES.filter(lambda v: v != parent[key]), label="value")
    elif kind == "config value changed":
        key = data.draw(st.sampled_from(sorted(payload["config"])), label="key")
        payload["config"][key] = data.draw(VALUES.filter(lambda v: v != payload["config"][key]), label="value")
    elif kind == "tensor replaced":
        place = data.draw(st.sampled_from([p for p in places if isinstance(_at(payload, p)[0][p[-1]], torch.Tensor)]))
        parent, key = _at(payload, place)
        old = parent[key]
        parent[key] = data.draw(st.sampled_from([
            torch.zeros_like(old), old.to(torch.float64), old.reshape(-1), torch.zeros(3), old.T.contiguous() if
            old.dim() == 2 and old.shape[0] != old.shape[1] else old.unsqueeze(0), 5, "weights", None, [old]]))
    elif kind == "key removed":
        parent, key = _at(payload, data.draw(st.sampled_from(places), label="place"))
        del parent[key]
    elif kind == "key added":
        parent, _ = _at(payload, data.draw(st.sampled_from([("x",)] + [(*p, "x") for p in places
                                                                        if isinstance(_at(payload, p)[0][p[-1]], dict)])))
        parent[data.draw(st.text(max_size=6).filter(lambda k: k not in parent), label="key")] = data.draw(VALUES)
    elif kind == "checksum value":
        key = data.draw(st.sampled_from(["sha256", "model_sha256"]))
        payload[key] = data.draw(VALUES.filter(lambda v: v != payload[key]), label="value")
    elif kind == "not a dict":
        return data.draw(st.one_of(VALUES, st.just(payload["model"]).map(lambda m: list(m.values())),
                                   st.just(torch.zeros(3)), st.just((payload,))), label="payload")
    return payload


PAYLOAD_KINDS = ["value changed", "config value changed", "tensor replaced", "key removed", "key added",
                 "checksum value", "not a dict"]


@pytest.mark.parametrize("kind", PAYLOAD_KINDS)
@settings(FUZZ, max_examples=8)
@given(data=st.data(), crafted=st.booleans())
def test_a_checkpoint_with_a_changed_payload_is_refused_in_one_line(kind, data, crafted, reference, tmp_path, capsys):
    payload = _payload_case(kind, data, copy.deepcopy(reference["payload"]))
    if crafted and isinstance(payload, dict):  # both checksums made to fit the change
        payload.pop("sha256", None)
        payload.pop("model_sha256", None)
        payload["sha256"] = tensors_sha256(payload_tensors(payload))
        payload["model_sha256"] = payload_sha256(payload, payload["sha256"])
    path = tmp_path / "best.pt"
    torch.save(payload, path)
    _judge(path, reference, capsys, crafted=crafted)


# --------------------------------------------------------------------------- (b) best.pt: the zip's records


class _Code:
    """A pickle that calls code when loaded: ``weights_only`` must refuse it."""

    def __init__(self, call):
        self.call = call

    def __reduce__(self):
        return self.call


def _records_case(kind: str, data, records: dict[str, bytes]) -> dict[str, bytes]:
    stored = sorted(name for name in records if "/data/" in name and not name.endswith("serialization_id"))
    name = data.draw(st.sampled_from(stored), label="record")
    pickled = next(key for key in records if key.endswith("data.pkl"))
    if kind == "record removed":
        del records[data.draw(st.sampled_from(sorted(records)), label="removed")]
    elif kind == "record resized":
        cut = data.draw(st.integers(1, 8), label="bytes")
        records[name] = records[name][:-cut] if data.draw(st.booleans(), label="shorter") else records[name] + bytes(cut)
    elif kind == "byte flipped in a record":
        raw = bytearray(records[name])
        raw[data.draw(st.integers(0, len(raw) - 1), label="byte")] ^= data.draw(st.integers(1, 255), label="mask")
        records[name] = bytes(raw)
    elif kind == "records swapped":
        other = data.draw(st.sampled_from([n for n in stored if n != name]), label="other")
        records[name], records[other] = records[other], records[name]
    elif kind == "byte flipped in the pickle":
        raw = bytearray(records[pickled])
        raw[data.draw(st.integers(0, len(raw) - 1), label="byte")] ^= data.draw(st.integers(1, 255), label="mask")
        records[pickled] = bytes(raw)
    elif kind == "pickle that calls code":
        call = data.draw(st.sampled_from([(os.system, ("true",)), (eval, ("1",)), (print, ("pickled code ran",)),
                                          (dict, ())]), label="call")
        records[pickled] = pickle.dumps({"format": "cipherlab-checkpoint-1", "model": _Code(call)},
                                        protocol=data.draw(st.integers(2, 5), label="protocol"))
    elif kind == "byte order":
        records[next(key for key in records if key.endswith("byteorder"))] = data.draw(
            st.sampled_from([b"big", b"", b"middle"]), label="order")
    return records


RECORD_KINDS = ["record removed", "record resized", "byte flipped in a record", "records swapped",
                "byte flipped in the pickle", "pickle that calls code", "byte order"]


@pytest.mark.parametrize("kind", RECORD_KINDS)
@settings(FUZZ, max_examples=8)
@given(data=st.data())
def test_a_checkpoint_with_changed_records_is_refused_in_one_line(kind, data, reference, tmp_path, capsys):
    records = _records_case(kind, data, dict(reference["records"]))
    path = tmp_path / "best.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:  # a valid zip, its CRCs right
        for name, raw in records.items():
            z.writestr(name, raw)
    _judge(path, reference, capsys, crafted=False)
    assert "pickled code ran" not in capsys.readouterr().out


def test_a_pickle_that_calls_code_is_one_line_in_a_real_process(reference, tmp_path):
    """In a real process torch's warning about the pickle protocol reached stderr before the error line."""
    records = dict(reference["records"])
    pickled = next(key for key in records if key.endswith("data.pkl"))
    records[pickled] = pickle.dumps(_Code((os.system, ("true",))), protocol=4)
    path = tmp_path / "best.pt"
    with zipfile.ZipFile(path, "w") as z:
        for name, raw in records.items():
            z.writestr(name, raw)
    done = subprocess.run([sys.executable, "-m", "cipherlab", "decrypt", "--checkpoint", str(path), BITS],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k != "CIPHERLAB_DEBUG"})
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and f"{path}: not a readable cipherlab checkpoint" in done.stderr, \
        done.stderr


def test_a_configuration_with_no_heads_is_refused_not_divided_by():
    from cipherlab.base.config import ConfigError, make_config

    with pytest.raises(ConfigError, match="n_heads=0: must be at least 1"):
        make_config("c1", "smoke", n_heads=0)
