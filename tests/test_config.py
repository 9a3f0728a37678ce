"""Tests for cipherlab.base.config: the ablation changes one component at a time; presets scale all alike."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

from cipherlab.base.config import (COMPONENTS, CONFIG_NAMES, ONSET_STEP, PRESETS, TOKENIZATIONS, Config,
                                   ConfigError, config_from_dict, make_config)


def differing_fields(a: Config, b: Config) -> set[str]:
    return {f.name for f in dataclasses.fields(Config) if f.name != "name" and getattr(a, f.name) != getattr(b, f.name)}


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("name", ["c2", "c3", "c4", "c5"])
def test_each_configuration_differs_from_c1_in_exactly_one_component(name, preset):
    changed = differing_fields(make_config("c1", preset), make_config(name, preset))
    assert len(changed) == 1 and changed <= set(COMPONENTS), changed


def test_the_four_components_are_the_ones_the_course_notes_ablate():
    assert make_config("c1").components() == {
        "pos_encoding": "sinusoidal",
        "attn_type": "mha",
        "norm": "layernorm",
        "tokenization": "bpe",
    }
    assert make_config("c2").pos_encoding == "rope"
    assert make_config("c3").attn_type == "gqa"
    assert make_config("c4").norm == "rmsnorm"
    assert make_config("c5").tokenization == "blt"


def test_assignment_preset_has_the_course_notes_sizes_and_the_schedule_measured_to_learn_at_them():
    c = make_config("c1", "assignment")
    assert (c.d_model, c.n_heads, c.enc_layers, c.dec_layers, c.ffn_dim, c.dropout) == (256, 8, 4, 4, 1024, 0.1)
    assert (c.max_batch_size, c.label_smoothing, c.grad_clip, c.patience) == (64, 0.1, 1.0, 10)
    # measured to learn at these sizes on a CPU (benchmarks/results/assignment_search), not the notes' 3e-4,
    # 8,192 tokens, 1,000 warm-up steps and 256-character chunks, which stayed at the unigram level
    assert (c.lr, c.token_budget, c.warmup_steps, c.chunk_chars) == (1e-3, 1024, 200, 32)
    assert c.onset_step == ONSET_STEP and make_config("c1", "cpu").onset_step is None
    # the course notes' own BPE sizes are one flag away (--tokens notes); the preset's own is the aligned BPE
    notes = make_config("c1", "assignment", **TOKENIZATIONS["notes"])
    assert (notes.src_vocab, notes.tgt_vocab, notes.source_mode) == (1024, 8000, "bits")
    assert (c.source_mode, c.tgt_vocab, c.target_tokens) == ("phase", None, "aligned") and c.src_vocab > 2051


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_preset_gives_all_five_configurations_the_same_sizes_and_budgets(preset):
    configs = [make_config(name, preset) for name in CONFIG_NAMES]
    shared = [{k: v for k, v in c.to_dict().items() if k not in (*COMPONENTS, "name")} for c in configs]
    assert all(s == shared[0] for s in shared)


def test_source_mode_is_one_setting_for_all_configurations():
    configs = [make_config(name, "cpu", source_mode="bytes") for name in CONFIG_NAMES]
    assert {c.source_mode for c in configs} == {"bytes"}


def test_config_round_trips_through_a_plain_dict():
    c = make_config("c3", "cpu")
    assert config_from_dict(c.to_dict()) == c


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: make_config("c9"), "unknown configuration 'c9': choose one of c1, c2, c3, c4, c5"),
        (lambda: make_config("c1", "huge"), "unknown preset 'huge': choose one of smoke, cpu, assignment"),
        (lambda: make_config("c1", d_modle=3), r"unknown Config field\(s\) \['d_modle'\]"),
        (lambda: make_config("c1", chunk_chars=250), "chunk_chars=250 is not a multiple of 8"),
        (lambda: make_config("c1", d_model=100), "d_model=100 is not divisible by n_heads=8"),
        (lambda: make_config("c1", source_mode="ascii"), "unknown source_mode 'ascii'"),
    ],
)
def test_bad_settings_are_refused_with_a_message_naming_them(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


def test_results_of_a_source_mode_other_than_the_presets_own_go_to_their_own_folder():
    assert make_config("c1", "cpu").source_mode == "bytes" and make_config("c1", "cpu").run_name == "cpu"
    assert make_config("c1", "cpu", source_mode="bits").run_name == "cpu-bits"
    assert make_config("c1", "smoke").run_name == "smoke"
    assert make_config("c1", "smoke", source_mode="bytes").run_name == "smoke-bytes"


OUT_OF_RANGE = [  # (field, a value outside its range, words of the range the message must give)
    ("grad_clip", -1.0, "above 0"),  # gradient ascent
    ("grad_clip", 0.0, "above 0"),  # no step moves
    ("weight_decay", -1.0, "0 (none) or more"),
    ("dropout", 2.0, "0 or more and below 1"),
    ("dropout", 1.0, "0 or more and below 1"),
    ("label_smoothing", 2.0, "0 (none) or more and below 1"),  # was an unexpected RuntimeError in training
    ("lr", -1.0, "above 0"),
    ("lr", 0.0, "above 0"),
    ("lr", float("nan"), "above 0"),
    ("seed", -1, "0 or more and below 2**32"),
    ("seed", 2**32, "0 or more and below 2**32"),
    ("max_epochs", 0, "must be at least 1"),
]


@pytest.mark.parametrize("field, value, allowed", OUT_OF_RANGE)
def test_a_setting_out_of_its_range_is_refused_naming_the_range(field, value, allowed):
    with pytest.raises(ConfigError, match=rf"^{field}={value}: .*{re.escape(allowed)}"):
        make_config("c1", "smoke", **{field: value})


@pytest.mark.parametrize("field, value, allowed", OUT_OF_RANGE)
def test_set_out_of_range_is_one_line_naming_the_flag_and_the_range(field, value, allowed, tmp_path, capsys):
    from cipherlab.__main__ import main

    text = str(value)
    code = main(["train", "--config", "c1", "--preset", "smoke", "--set", f"{field}={text}", "--data-dir",
                 str(tmp_path / "no-data"), "--out", str(tmp_path / "run"), "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "Traceback" not in err and "unexpected" not in err
    assert err.startswith(f"cipherlab: error: --set {field}={text}: ") and allowed in err


def test_settings_at_the_edges_of_their_ranges_are_accepted():
    c = make_config("c1", "smoke", grad_clip=1e-3, weight_decay=0.0, dropout=0.0, label_smoothing=0.0, lr=1e-6,
                    seed=2**32 - 1)
    assert (c.grad_clip, c.weight_decay, c.dropout, c.label_smoothing, c.seed) == (1e-3, 0.0, 0.0, 0.0, 2**32 - 1)


# --------------------------------------------------------------------------- one default: Config() is make_config("c1")


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Config)])
def test_each_default_of_config_is_make_config_c1s(field):
    """The dataclass defaults are the default configuration: C1, the assignment preset, the default recipe."""
    assert getattr(Config(), field) == getattr(make_config("c1"), field)


def test_config_is_make_config_c1_with_its_recipe_and_tokenisation():
    assert Config() == make_config("c1") == make_config("c1", "assignment", "cipher")
    assert Config().recipe == "cipher" and Config().to_dict()["recipe"] == "cipher"


def test_a_stored_configuration_that_lacks_a_field_is_refused_naming_the_converter():
    """No field is left to a default: a file an older cipherlab wrote meant the defaults of its time, not today's."""
    stored = make_config("c2", "cpu", recipe="notes").to_dict()
    assert config_from_dict(stored) == make_config("c2", "cpu", recipe="notes")
    assert config_from_dict({k: v for k, v in stored.items() if k != "recipe"}) == config_from_dict(stored)
    with pytest.raises(ConfigError, match=r"written by an older cipherlab \(no select_on, onset_step\); convert its "
                                          r"file with tools/convert_older\.py from the cipherlab repository$"):
        config_from_dict({k: v for k, v in stored.items() if k not in ("select_on", "onset_step")})


def _stored_configurations() -> dict[str, dict]:
    """{place: stored configuration} of every committed model file and results record (and the kept
    configurations of probes.json, whose models left the tree)."""
    from cipherlab.runner.trained import read_payload

    root = Path(__file__).resolve().parents[1]
    found = {p.relative_to(root).as_posix(): read_payload(p)["config"]
             for p in sorted([*(root / "results").rglob("*.safetensors"), *(root / "results").rglob("*.pt")])}
    for path in sorted((root / "results").rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("hyperparameters"), dict):
            found[f"{path.relative_to(root).as_posix()}:hyperparameters"] = data["hyperparameters"]
        for name, kept in (data.get("models") or {}).items() if isinstance(data, dict) else ():
            if isinstance(kept, dict) and isinstance(kept.get("config"), dict):
                found[f"{path.relative_to(root).as_posix()}:{name}"] = kept["config"]
    return found


def test_every_stored_configuration_under_results_stores_every_field_and_its_recipe():
    """Each committed model file and results record stores every Config field (none is left to a default) and
    the name of the recipe its fields make, and reads back as exactly what it stores."""
    stored = _stored_configurations()
    assert len(stored) >= 120 and sum(":" not in place for place in stored) >= 14
    fields = {f.name for f in dataclasses.fields(Config)}
    for place, values in stored.items():
        assert set(values) == fields | {"recipe"}, place
        config = config_from_dict(values)
        assert json.loads(json.dumps(config.to_dict())) == values, place


def test_the_assignment_presets_onset_step_is_twice_the_latest_measured_onset():
    """ONSET_STEP, where an assignment run still at the unigram level stops, is read off the committed curves of
    every configuration at the preset's own settings (benchmarks/results/assignment_search), and the README
    there is what the script writes from them."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "assignment_search.py"
    spec = importlib.util.spec_from_file_location("assignment_search", path)
    search = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(search)
    onsets = search.onset_steps()
    assert set(onsets) == set(CONFIG_NAMES) and None not in onsets.values()  # every configuration left it
    assert ONSET_STEP == 2 * max(onsets.values())
    assert (search.FOLDER / "README.md").read_text(encoding="utf-8") == search.readme()


def test_the_choice_lists_are_the_models_own():
    """base imports nothing of models, so its choice lists are written out; they must match what the models take."""
    from cipherlab.base.config import _CHOICES
    from cipherlab.models.attention import ATTENTION_TYPES
    from cipherlab.models.blt import SOURCE_MEMORIES
    from cipherlab.models.norm import NORMS
    from cipherlab.models.transformer import POS_ENCODINGS

    assert _CHOICES["pos_encoding"] == tuple(k for k in POS_ENCODINGS if k != "learned")  # no config builds "learned"
    assert _CHOICES["attn_type"] == ATTENTION_TYPES and _CHOICES["norm"] == tuple(NORMS)
    assert _CHOICES["blt_source_memory"] == SOURCE_MEMORIES
