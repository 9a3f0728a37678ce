"""A trained model as a Hugging Face model repository: a folder to upload, and the upload.

    python -m cipherlab export --checkpoint runs/assignment/c1/best.pt --hub hub/c1
    python -m cipherlab export --checkpoint runs/assignment/c1/best.pt --hub hub/c1 --push USER/cipherlab-c1

:func:`export_model_folder` writes the folder the hub shows as a model page:

- ``model.safetensors``: the model, exactly as :func:`~cipherlab.runner.trained.export_checkpoint`
  writes it (weights, configuration and codec; its checksums over all it holds). It is the only file a
  loader reads: ``evaluate``, ``decrypt``, ``doctor`` and ``load_trained`` take the folder itself.
- ``config.json``: the configuration, and the model's checksum, for the reader.
- ``src_tokenizer.json``, ``tgt_tokenizer.json``: the BPE tokenizers as text (C1-C4; C5 has none).
- ``README.md``: the model card. YAML metadata (library name, tags, the dataset, each test metric of the
  results record with its decoding named), then what the model is, its scores, and the command that trained it.

The copies beside the model are checked against it when the folder is loaded
(:func:`~cipherlab.pipeline.checkpoint.read_model_folder`). The scores come from the run's results record
(``train`` writes it beside the run folder: ``runs/assignment/c1.json`` for ``runs/assignment/c1/best.pt``), which
must describe the same configuration. :func:`push_model_folder` uploads the folder with ``huggingface_hub`` (the
``hub`` extra), the one step that needs a network and a token; it says in one line what to do without them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from cipherlab.base.config import config_from_dict
from cipherlab.runner.errors import first_line, outside_results, why, writable_folder
from cipherlab.base.files import write_atomic
from cipherlab.base.markdown import markdown_table
from cipherlab.runner.integrity import HUB_CONFIG_FILE, HUB_MODEL_FILE, read_model_folder
from cipherlab.runner.trained import export_checkpoint, read_payload
from cipherlab.runner.integrity import _RUNTIME_FIELDS

__all__ = ["CARD_METRICS", "export_model_folder", "model_card", "push_model_folder", "record_for"]

# (record key, metric type on the hub, the card's name for it): the course handout's metrics, from greedy decoding
CARD_METRICS = [
    ("bit_accuracy", "accuracy", "bit accuracy"),
    ("sequence_accuracy", "exact_match", "sequence accuracy (whole lines exact)"),
    ("char_accuracy", "accuracy", "character accuracy"),
    ("levenshtein", "levenshtein", "Levenshtein distance (mean edits per line)"),
    ("char_error_rate", "cer", "Levenshtein distance per reference character (CER)"),
    ("bleu", "bleu", "BLEU (sacrebleu)"),
    ("rouge1", "rouge", "ROUGE-1 F1"),
    ("rouge2", "rouge", "ROUGE-2 F1"),
    ("rougeL", "rouge", "ROUGE-L F1"),
]
COMPONENTS = {"c1": "the baseline: sinusoidal positions, multi-head attention, LayerNorm, BPE",
              "c2": "C1 with RoPE in place of sinusoidal positions",
              "c3": "C1 with grouped-query attention in place of multi-head attention",
              "c4": "C1 with RMSNorm in place of LayerNorm",
              "c5": "C1 with a Byte Latent Transformer (entropy patches of bytes) in place of BPE tokens"}
_INSTALL = "pip install 'cipherlab[hub]'"


def record_for(checkpoint: str | os.PathLike) -> Path | None:
    """The results record ``train`` wrote for ``checkpoint`` (``runs/cpu/c1.json`` for ``runs/cpu/c1/best.pt``),
    or None when there is none there."""
    folder = Path(checkpoint).parent
    candidate = folder.parent / f"{folder.name}.json"
    return candidate if candidate.is_file() else None


def _read_record(path: Path, config: dict) -> dict:
    """The record at ``path``, checked to describe the model whose stored configuration is ``config``."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"--record {path}: not a readable results record ({why(e)}); pass the .json that "
                         "`python -m cipherlab train` wrote for this run") from None
    stored = record.get("hyperparameters") if isinstance(record, dict) else None
    if not isinstance(stored, dict) or not isinstance(record.get("sets", {}).get("test"), dict):
        raise ValueError(f"--record {path}: not a cipherlab results record (no hyperparameters or test scores); "
                         "pass the .json that `python -m cipherlab train` wrote for this run")
    recorded, config = (json.loads(json.dumps(config_from_dict(c).to_dict())) for c in (stored, config))
    for field, value in config.items():
        if field not in _RUNTIME_FIELDS and recorded.get(field) != value:
            raise ValueError(f"--record {path}: a record of another model ({field} is {recorded.get(field)!r} there, "
                             f"{value!r} in the model); pass the record of the run that wrote this checkpoint")
    return record


def _yaml(value) -> str:
    """``value`` as a YAML flow scalar: JSON's own spelling, which YAML reads as the same value."""
    return json.dumps(value)


def model_card(config: dict, record: dict | None, model_name: str) -> str:
    """The README.md of a model folder: YAML metadata the hub reads, then the card a reader sees."""
    name, preset = config["name"], config["preset"]
    test = (record or {}).get("sets", {}).get("test", {})
    decoding = test.get("decoding", "greedy")
    scores = [(key, kind, label, test[key]) for key, kind, label in CARD_METRICS
              if isinstance(test.get(key), (int, float))]
    lines = ["---", "library_name: cipherlab", "license: mit", "tags:"]
    lines += [f"- {tag}" for tag in ("cipherlab", "encoder-decoder", "transformer", "xor-cipher", "decryption",
                                     "from-scratch", name)]
    lines += ["datasets:", "- brown", "model-index:", f"- name: {_yaml(model_name)}", "  results:"]
    if scores:
        lines += ["  - task:", "      type: translation", "      name: Decryption of a repeating-key XOR cipher",
                  "    dataset:", "      type: brown",
                  "      name: Brown corpus, cipherlab's test lines", "      split: test", "    metrics:"]
        for key, kind, label, value in scores:
            lines += [f"    - type: {kind}", f"      name: {_yaml(f'{label}, {decoding} decoding')}",
                      f"      value: {_yaml(value)}"]
    else:
        lines[-1] = "  results: []"
    lines += ["---", "", f"# {model_name}: cipherlab {name.upper()}, {preset} preset", "",
              f"An encoder-decoder Transformer trained from scratch to decrypt a repeating-key XOR cipher (key "
              f"`ANLP2026`) of English text given as bit strings. {name.upper()} is {COMPONENTS.get(name, name)}.", "",
              f"Sizes: d_model {config['d_model']}, {config['n_heads']} heads, {config['enc_layers']}+"
              f"{config['dec_layers']} layers, {config['chunk_chars']}-character chunks, seed {config['seed']}.",
              ""]
    if scores:
        lines += [f"## Test scores ({decoding} decoding, {test.get('lines', '?')} test lines)", "",
                  markdown_table(["metric", "value"], [[label, f"{value:.6g}"] for _, _, label, value in scores]), ""]
    else:
        lines += ["No results record was given, so this card has no scores: export again with "
                  "`--record RUN.json`.", ""]
    if record and record.get("command"):
        lines += ["## How it was trained", "", "```bash", record["command"], "```", ""]
    lines += ["## Use", "", "With cipherlab installed, download this folder and decrypt with it:", "", "```bash",
              f"hf download USER/REPO --local-dir {name}", f"python -m cipherlab decrypt --checkpoint {name} "
              "0001001000111100001000110011000001100001", "```", "",
              f"`{HUB_MODEL_FILE}` holds the weights, the configuration and the tokenizers, with checksums over "
              f"all of them; `{HUB_CONFIG_FILE}` and the tokenizer files beside it are copies for reading, checked "
              "against it when the folder is loaded.", ""]
    return "\n".join(lines)


def export_model_folder(checkpoint: str | os.PathLike, folder: str | os.PathLike, *, record: str | os.PathLike | None
                        = None, half: bool = False, model_name: str | None = None) -> Path:
    """Write ``folder`` as a Hugging Face model repository for ``checkpoint`` (a best.pt, or an export already made).

    ``record``: the run's results record for the card's scores (default: :func:`record_for`'s, when there is one).
    ``folder`` must be new or empty, and outside the committed results. Returns the folder.
    """
    checkpoint, folder = Path(checkpoint), outside_results(folder, "--hub")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"--hub {folder}: not an empty folder; name a new folder for the model repository")
    if half and checkpoint.suffix == ".safetensors":
        raise ValueError(f"--half: {checkpoint} is already an export, stored as it was exported; pass its best.pt "
                         "to store float16 weights")
    payload = read_payload(checkpoint)  # checksums checked, before anything is written
    config = payload["config"]
    record_path = Path(record) if record is not None else record_for(checkpoint)
    run = _read_record(record_path, config) if record_path is not None else None
    writable_folder(folder, "--hub")
    if checkpoint.suffix == ".safetensors":  # the model appears whole or not at all (write_atomic)
        write_atomic(folder / HUB_MODEL_FILE, lambda tmp: shutil.copyfile(checkpoint, tmp))
    else:
        export_checkpoint(checkpoint, folder / HUB_MODEL_FILE, half=half)
    stored = read_model_folder_config(folder)
    write_atomic(folder / HUB_CONFIG_FILE, json.dumps({"library_name": "cipherlab", "config": stored["config"],
                                                       "model_sha256": stored["model_sha256"]}, indent=2) + "\n")
    for key, value in payload["artifacts"].items():
        if isinstance(value, str):
            write_atomic(folder / f"{key}.json", value)
    name = model_name or (run or {}).get("name") or f"cipherlab-{config['name']}-seed{config['seed']}"
    write_atomic(folder / "README.md", model_card(config, run, name))
    read_model_folder(folder)  # what a loader will read agrees with itself
    return folder


def read_model_folder_config(folder: Path) -> dict:
    """{"config": the stored configuration, "model_sha256": the whole-model checksum} of ``folder``'s model."""
    from safetensors import safe_open

    with safe_open(str(folder / HUB_MODEL_FILE), framework="pt", device="cpu") as f:
        metadata = f.metadata() or {}
    return {"config": json.loads(metadata["config"]), "model_sha256": metadata.get("model_sha256")}


def push_model_folder(folder: str | os.PathLike, repo_id: str, *, private: bool = False) -> str:
    """Upload ``folder`` to the hub as model repository ``repo_id`` (``USER/NAME``); return its address.

    The one call that needs a network and a token (``hf auth login`` or ``HF_TOKEN``): without either it raises
    ValueError with one line saying what to do, and the folder stays ready to upload by hand.
    """
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(f"--push {repo_id!r}: name the repository as USER/NAME, e.g. alice/cipherlab-c1")
    try:
        import huggingface_hub
    except ImportError:
        raise ValueError(f"--push needs the huggingface_hub package: {_INSTALL}; {folder} is ready to upload "
                         "by hand meanwhile") from None
    if not huggingface_hub.get_token():
        raise ValueError(f"--push: no Hugging Face token (run `hf auth login` or set HF_TOKEN), then "
                         f"`hf upload {repo_id} {folder} .`; {folder} is ready")
    try:
        api = huggingface_hub.HfApi()
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model",
                          commit_message="cipherlab export --hub")
    except Exception as e:  # no network, a refused token, a name taken by someone else: one line, the folder kept
        raise ValueError(f"--push {repo_id}: the upload failed ({first_line(e)}); {folder} is complete, so upload "
                         f"it later with `hf upload {repo_id} {folder} .`") from None
    return f"https://huggingface.co/{repo_id}"
