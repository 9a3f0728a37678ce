"""Shared by the tests of committed models: does a model decode a probe record's lines as recorded?"""

from __future__ import annotations

import torch

from cipherlab.analysis import ablation
from cipherlab.data.cipher import encrypt
from cipherlab.data.corpus import load_corpus
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.analysis.probes import probe_sets


def outcomes(pred: list[str], plain: list[str]) -> tuple[str, list[int]]:
    """Per line: "1" where the prediction is exact, and how many characters are right."""
    return "".join("1" if p == r else "0" for p, r in zip(pred, plain)), [
        sum(a == b for a, b in zip(p, r)) for p, r in zip(pred, plain)]


def assert_decodes_as_recorded(model, codec, config, record: dict, first: dict[str, int], brown_lines: int) -> None:
    """The first ``first[set]`` lines of each probe set (length-aware) and the first ``brown_lines`` Brown
    test lines (free and length-aware) come out as ``record`` says, line by line."""
    kwargs = dict(chunk_chars=config.chunk_chars, device=torch.device("cpu"), token_budget=config.token_budget,
                  max_batch_size=config.max_batch_size)
    sets = probe_sets(config, n_random=record["sets"]["random_letters"]["lines"])  # over the model's own alphabet
    for set_name, n in first.items():
        part = ablation.section(record, set_name)
        assert part["lines"] == len(sets[set_name])
        plain = sets[set_name][:n]
        exact, right = outcomes(decrypt_lines(model, codec, [encrypt(t) for t in plain], length_aware=True,
                                              **kwargs), plain)
        assert (exact, right) == (part["exact_by_line"][:n], part["right_chars_by_line"][:n]), set_name
    plain, cipher = load_corpus().lines("test")
    for key, length_aware in (("test_free", False), ("test", True)):
        exact, right = outcomes(decrypt_lines(model, codec, cipher[:brown_lines], length_aware=length_aware,
                                              **kwargs), plain[:brown_lines])
        assert (exact, right) == (record["sets"][key]["exact_by_line"][:brown_lines],
                                  record["sets"][key]["right_chars_by_line"][:brown_lines]), key


def assert_readme_is_generated(folder, tmp_path, monkeypatch, subfolders: tuple[str, ...] = ()) -> None:
    """``folder/make_readme.py``, run on copies of the records in ``folder`` (and its ``subfolders``),
    writes exactly the committed ``folder/README.md``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{folder.name}_readme", folder / "make_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (folder / "README.md").read_text(encoding="utf-8")
    monkeypatch.setattr(module, "HERE", tmp_path)
    for sub in ("", *subfolders):
        (tmp_path / sub).mkdir(exist_ok=True)
        for record in (folder / sub).glob("*-seed*.json"):
            (tmp_path / sub / record.name).write_bytes(record.read_bytes())
    module.main()
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == committed
