"""The five ablation configurations, the presets that size them and the recipes that train them.

There is one :class:`Config` dataclass holding every setting; C1 is its defaults, and C2-C5 are C1
with exactly one field changed: ``pos_encoding="rope"``, ``attn_type="gqa"``, ``norm="rmsnorm"``,
``tokenization="blt"``. A *preset* (``smoke``, ``cpu``, ``assignment``) scales sizes and budgets for
all five alike; a *recipe* (:data:`RECIPES`) says how all five are trained.

>>> make_config("c2", "smoke").pos_encoding
'rope'
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

__all__ = [
    "C1_COMPONENTS",
    "COMPONENTS",
    "CONFIG_NAMES",
    "PRESETS",
    "RECIPES",
    "RECIPE_KNOWLEDGE",
    "DEFAULT_RECIPE",
    "ONSET_STEP",
    "TOKENIZATIONS",
    "Config",
    "ConfigError",
    "change_from_c1",
    "config_from_dict",
    "lacking_fields",
    "older",
    "make_config",
    "parse_field",
    "recipe_caveats",
    "recipe_of",
    "tokenization_of",
]


# The assignment preset's onset check (Config.onset_step): twice the latest step by which any measured run at
# those sizes had passed 25 % teacher-forced validation accuracy (tests/test_config.py checks it).
ONSET_STEP = 600


class ConfigError(ValueError):
    """A configuration or preset name, or a field value, that does not exist."""


@dataclass(frozen=True)
class Config:
    """Every setting of one training run. The defaults are ``make_config("c1")``: C1 at the assignment's sizes."""

    name: str = "c1"  # which ablation configuration this is: c1..c5
    preset: str = "assignment"  # which preset sized it: smoke, cpu, assignment

    # --- the four ablated components: C2-C5 each change exactly one of these ---
    pos_encoding: str = "sinusoidal"  # "sinusoidal" | "rope"           (C2)
    rope_cross_attention: bool = True  # with RoPE: rotate cross-attention too (target vs source positions)
    attn_type: str = "mha"  # "mha" | "gqa"                             (C3)
    norm: str = "layernorm"  # "layernorm" | "rmsnorm"                  (C4)
    tokenization: str = "bpe"  # "bpe" (Seq2SeqTransformer) | "blt"    (C5)

    # --- model sizes, shared by all five ---
    d_model: int = 256  # width of every token / patch vector
    n_heads: int = 8  # query heads in every attention layer
    n_kv_heads: int = 2  # key/value heads when attn_type == "gqa" (ignored for MHA)
    enc_layers: int = 4  # encoder layers (for C5: layers of the global encoder)
    dec_layers: int = 4  # decoder layers (for C5: layers of the global decoder)
    ffn_dim: int = 1024  # hidden width of the position-wise feed-forward network
    dropout: float = 0.1  # dropout after attention, FFN and positional encoding

    # --- C5 only: the byte-level local models around the global transformer ---
    blt_local_layers: int = 1  # layers of the local encoder and of the local decoder
    blt_window: int = 128  # bytes each byte attends to in the local encoder/decoder
    blt_patch_tgt: int = 4  # target bytes per fixed decoder patch
    blt_max_patch: int = 12  # longest source patch the entropy boundaries may make
    blt_entropy_percentile: float = 75.0  # a source patch starts above this entropy percentile
    blt_source_memory: str = "bytes"  # what the local decoder's 2nd cross-attention reads: "bytes" | "patches"

    # --- data: the tokenisation fields default to the assignment preset's, TOKENIZATIONS["aligned"] ---
    source_mode: str = "phase"  # how C1-C4 read the cipher: "bits" (BPE over 0/1) | "bytes" | "phase" (bytes tagged with their key phase)
    src_vocab: int | None = 3072  # source BPE vocabulary (C1-C4); None: no merges, base symbols only
    tgt_vocab: int | None = None  # target BPE vocabulary (C1-C4); None: no merges, characters only
    target_tokens: str = "aligned"  # "bpe": the target's own BPE; "aligned": token i is source token i's plaintext
    merges_on: str = "chunks"  # what the BPEs learn from: the training "lines" or "chunks" as the recipe shows them
    bpe_dropout: float = 0.1  # BPE-dropout on the training chunks: each merge skipped with this probability
    chunk_chars: int = 32  # plaintext characters per training chunk; a multiple of 8
    max_train_lines: int | None = None  # use only the first N training lines (None: all)
    max_eval_lines: int | None = None  # use only the first N val and test lines (None: all)
    # --- the recipe: learning the cipher rather than the corpus (defaults: RECIPES["cipher"], select_on too) ---
    phase_shuffle: float = 1.0  # share of training chunks replaced by a phase-preserving shuffle (0..1)
    case_flip: float = 0.5  # with phase_shuffle: chance that each letter of a shuffled chunk flips case (bit 5 of its cipher byte too)
    substitution: float = 0.0  # with phase_shuffle: chance that each character of a shuffled chunk becomes a random one of the alphabet
    source_eos: bool = True  # end every cipher sequence with an end-of-source token
    bit_embeddings: bool = True  # byte/character embeddings (and the tied head) linear in the 8 bits
    phase_embedding: bool = True  # add a learned vector per key phase (position mod 8) to the embeddings

    # --- optimisation ---
    lr: float = 1e-3  # AdamW peak learning rate
    betas: tuple[float, float] = (0.9, 0.98)  # AdamW betas (Vaswani et al. 2017)
    weight_decay: float = 0.01  # AdamW decoupled weight decay on weight matrices
    token_budget: int = 1024  # source tokens per batch at most
    max_batch_size: int = 64  # sequences per batch at most
    label_smoothing: float = 0.1  # training loss only; validation uses 0
    warmup_steps: int = 200  # linear warm-up, then inverse-square-root decay
    grad_clip: float = 1.0  # global gradient-norm clip
    max_epochs: int = 100  # hard cap on epochs
    patience: int = 10  # early stopping: epochs without a better validation score
    select_on: str = "val_accuracy"  # which validation score picks best.pt and stops early: "val_loss" | "val_accuracy"
    augment_val: bool = False  # validate on chunks shuffled, case-flipped and substituted like the training chunks
    time_budget_s: float | None = None  # wall-clock training budget per run (None: none)
    eval_every: int | None = None  # also validate every N optimiser steps into curve.jsonl
    # stop with NotLearning when validation accuracy is still below onset_accuracy at step onset_step (None: never)
    onset_step: int | None = ONSET_STEP
    onset_accuracy: float = 0.25
    seed: int = 0  # seeds Python, NumPy and torch

    def __post_init__(self) -> None:
        _check_types(self)
        _check_choice("name", self.name, CONFIG_NAMES)
        _check_choice("preset", self.preset, tuple(PRESETS))
        for field, choices in _CHOICES.items():
            _check_choice(field, getattr(self, field), choices)
        for field in (*_POSITIVE, *_RANGES):  # before the divisions: n_heads=0
            problem = _out_of_range(field, getattr(self, field))
            if problem:
                raise ConfigError(f"{field}={getattr(self, field)}: {problem}")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                              "pick sizes where each head gets d_model // n_heads dimensions")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}; "
                              "GQA shares each key/value head among n_heads // n_kv_heads query heads")
        for field in ("case_flip", "substitution"):
            if getattr(self, field) and not self.phase_shuffle:
                raise ConfigError(f"{field}={getattr(self, field)} with phase_shuffle=0: it applies to the shuffled "
                                  "chunks only; set phase_shuffle above 0 too")
        if self.target_tokens == "aligned" and self.tokenization == "bpe" and (
                self.source_mode != "phase" or self.tgt_vocab is not None):
            raise ConfigError(
                f"target_tokens=aligned with source_mode={self.source_mode}, tgt_vocab={self.tgt_vocab}: aligned "
                "targets are the plaintext of phase-tagged source tokens; set source_mode=phase and tgt_vocab=null"
            )
        if self.chunk_chars % 8:
            raise ConfigError(f"chunk_chars={self.chunk_chars} is not a multiple of 8: chunks would start "
                              "at different key phases; use 64, 128, 256, ...")

    @property
    def run_name(self) -> str:
        """Folder of this preset's runs and results: ``cpu``; ``cpu-bits`` for a source mode not the preset's
        own; ``cpu-notes`` for a named recipe other than the default."""
        own = PRESETS[self.preset]["source_mode"]
        name = self.preset if self.source_mode == own else f"{self.preset}-{self.source_mode}"
        return name if self.recipe in (DEFAULT_RECIPE, "custom") else f"{name}-{self.recipe}"

    def model_hyperparameters(self) -> dict:
        """Sizes and dropout, as both model classes take them; the same for all five configurations."""
        return {field: getattr(self, field) for field in ("d_model", "n_heads", "enc_layers", "dec_layers", "ffn_dim",
                                                          "dropout")}

    def components(self) -> dict[str, str]:
        """The four fields the ablation varies, e.g. ``{"pos_encoding": "rope", ...}``."""
        return {field: getattr(self, field) for field in COMPONENTS}

    @property
    def recipe(self) -> str:
        """The training recipe these fields make: ``cipher``, ``shuffles``, ``notes`` or ``custom``."""
        return recipe_of(self)

    def to_dict(self) -> dict:
        """Plain-Python form (for checkpoints and results files), with the recipe's name."""
        return {**dataclasses.asdict(self), "recipe": self.recipe}


# The values each choice field may take (tests/test_config.py checks them against the models' own lists).
_CHOICES = {
    "pos_encoding": ("sinusoidal", "rope"),
    "attn_type": ("mha", "gqa"),
    "norm": ("layernorm", "rmsnorm"),
    "tokenization": ("bpe", "blt"),
    "source_mode": ("bits", "bytes", "phase"),
    "target_tokens": ("bpe", "aligned"),
    "merges_on": ("lines", "chunks"),
    "blt_source_memory": ("bytes", "patches"),
    "select_on": ("val_loss", "val_accuracy"),
}
COMPONENTS = ("pos_encoding", "attn_type", "norm", "tokenization")

# C2-C5 as changes to C1.
_VARIANTS = {
    "c1": {},
    "c2": {"pos_encoding": "rope"},
    "c3": {"attn_type": "gqa"},
    "c4": {"norm": "rmsnorm"},
    "c5": {"tokenization": "blt"},
}
CONFIG_NAMES = tuple(_VARIANTS)

# Each preset overrides the same fields for all five configurations.
PRESETS = {
    # Seconds per configuration on one CPU core: a tiny model on a few hundred short chunks.
    # Enough for the loss to fall and every code path to run; not enough to decrypt.
    "smoke": dict(d_model=32, n_heads=4, n_kv_heads=2, enc_layers=1, dec_layers=1, ffn_dim=64, blt_window=32,
                  source_mode="bits", src_vocab=64, tgt_vocab=128, target_tokens="bpe", merges_on="lines",
                  bpe_dropout=0.0, chunk_chars=32, max_train_lines=120, max_eval_lines=12, token_budget=2048,
                  max_batch_size=32, lr=3e-4, warmup_steps=20, max_epochs=3, patience=3, onset_step=None),
    # About 15 minutes per configuration on a 2-core CPU. C1-C4 read whole cipher bytes and learn no
    # merges, so source token i and target token i are the same character. Width and depth are cut;
    # the heads the ablation compares are not.
    "cpu": dict(d_model=128, n_heads=8, n_kv_heads=2, enc_layers=2, dec_layers=2, ffn_dim=512, dropout=0.0,
                blt_window=32, source_mode="bytes", src_vocab=None, tgt_vocab=None, chunk_chars=32,
                max_train_lines=2000, max_eval_lines=200, lr=1e-3, token_budget=2048, max_batch_size=64,
                warmup_steps=200, max_epochs=100, patience=10, time_budget_s=14 * 60.0, onset_step=None),
    # The assignment's model sizes (the defaults of Config), with the tokenisation and schedule measured to
    # learn at those sizes: the aligned BPE over 32-character chunks, lr 1e-3 after 200 warm-up steps.
    "assignment": dict(chunk_chars=32, lr=1e-3, warmup_steps=200, token_budget=1024, onset_step=ONSET_STEP),
}


# A *tokenisation* of C1-C4: how the cipher and the plaintext become tokens. "aligned": BPE over the cipher
# bytes tagged with their key phase, the target's tokens the plaintext of the source's. "notes": the
# assignment's BPE over bits, 1024 source and 8000 target tokens. "chars": whole bytes in, characters out.
TOKENIZATIONS = {
    "aligned": dict(source_mode="phase", src_vocab=3072, tgt_vocab=None, target_tokens="aligned", merges_on="chunks",
                    bpe_dropout=0.1),
    "notes": dict(source_mode="bits", src_vocab=1024, tgt_vocab=8000, target_tokens="bpe", merges_on="lines",
                  bpe_dropout=0.0),
    "chars": dict(source_mode="bytes", src_vocab=None, tgt_vocab=None, target_tokens="bpe", merges_on="lines",
                  bpe_dropout=0.0),
}
PRESETS["assignment"].update(TOKENIZATIONS["aligned"])
PRESETS["cpu"].update(TOKENIZATIONS["chars"])  # its source_mode and vocabularies, and the rest of the chars tokenisation


def tokenization_of(config: Config) -> str:
    """The name of the :data:`TOKENIZATIONS` entry ``config``'s fields make, or ``"custom"``.

    >>> tokenization_of(make_config("c1", "assignment")), tokenization_of(make_config("c1", "cpu"))
    ('aligned', 'chars')
    """
    for name, fields in TOKENIZATIONS.items():
        if all(getattr(config, field) == value for field, value in fields.items()):
            return name
    return "custom"


# A *recipe* is how the five are trained, the same for all five. "cipher", the default, learns the cipher
# rather than the corpus; "notes" is the assignment's plain training; "shuffles" names older records.
RECIPES = {
    "cipher": dict(
        phase_shuffle=1.0,  # every training chunk a phase-preserving shuffle: no English left to lean on
        case_flip=0.5,  # ... and each of its letters in either case: upper case is no longer rare
        substitution=0.0,
        source_eos=True,  # the decoder's EOS reads a source token, not the absence of one
        bit_embeddings=True,  # bytes and characters embedded (and scored) linearly in their 8 bits
        phase_embedding=True,  # a learned vector per key phase, position mod 8
        select_on="val_accuracy",  # the loss of a bit-linear head is the wrong signal (see select_on)
    ),
    "shuffles": dict(
        phase_shuffle=1.0, case_flip=0.0, substitution=0.0, source_eos=False, bit_embeddings=True,
        phase_embedding=True, select_on="val_accuracy",
    ),
    "notes": dict(
        phase_shuffle=0.0, case_flip=0.0, substitution=0.0, source_eos=False, bit_embeddings=False,
        phase_embedding=False, select_on="val_loss",
    ),
}
DEFAULT_RECIPE = "cipher"

# What each part of the "cipher" recipe knows of the task beyond the training pairs (none uses the key's bytes).
RECIPE_KNOWLEDGE = {
    "phase_shuffle": "the key's period: characters move only among positions of the same phase",
    "case_flip": "the bit structure of XOR: flipping bit 5 of a letter flips bit 5 of its cipher byte",
    "source_eos": "nothing: the source says where it ends",
    "bit_embeddings": "the bit structure of XOR: a byte's row is linear in its 8 bits",
    "phase_embedding": "the key's period: a learned vector per position mod 8",
    "select_on": "nothing: which validation score picks best.pt",
}


def recipe_of(config: Config) -> str:
    """The name of the recipe ``config`` was trained with, or ``"custom"`` when its recipe fields
    match none of :data:`RECIPES` (a run that changed one of them).

    >>> recipe_of(make_config("c1", "cpu")), recipe_of(make_config("c1", "cpu", recipe="notes"))
    ('cipher', 'notes')
    """
    for name, fields in RECIPES.items():
        if all(getattr(config, field) == value for field, value in fields.items()):
            return name
    return "custom"


def recipe_caveats(config: Config) -> list[str]:
    """What of the recipe a configuration's tokenization cannot take, one sentence each (empty
    when it takes all of it). Training records carry these, so nothing is dropped silently."""
    notes = []
    bpe, bits = config.tokenization == "bpe", config.source_mode == "bits"
    if bpe and bits and config.bit_embeddings:
        notes.append("bit_embeddings: the source tokens are BPE pieces of the bit string, not whole bytes, so each "
                     "source token keeps a free embedding row; only the target characters are bit-factored")
    if bpe and bits and config.phase_embedding:
        notes.append("phase_embedding: source token i is not character i of a bits-mode BPE, so the source's key-phase "
                     "vectors follow token positions, not characters; the target side's follow characters")
    if bpe and config.tgt_vocab is not None and config.bit_embeddings:
        notes.append("bit_embeddings: target BPE tokens longer than one character keep a free embedding row")
    if bpe and bits and config.src_vocab is not None and config.phase_shuffle > 0:
        notes.append("tokenisation: a BPE over the cipher's bits was measured not to learn under this recipe (its "
                     "tokens cut through characters, and its merges, learned on English, are rare in shuffled "
                     "chunks); the aligned BPE (--tokens aligned) was")
    return notes


def make_config(name: str, preset: str = "assignment", recipe: str = DEFAULT_RECIPE, **overrides) -> Config:
    """Configuration ``name`` (c1..c5) sized by ``preset``, trained by ``recipe``; ``overrides``
    win over all three.

    >>> make_config("c3", "cpu").attn_type, make_config("c3", "cpu").d_model
    ('gqa', 128)
    >>> make_config("c1", "cpu").phase_shuffle, make_config("c1", "cpu", recipe="notes").phase_shuffle
    (1.0, 0.0)
    """
    name, preset, recipe = name.lower(), preset.lower(), recipe.lower()
    _check_choice("configuration", name, CONFIG_NAMES)
    _check_choice("preset", preset, tuple(PRESETS))
    _check_choice("recipe", recipe, tuple(RECIPES))
    fields = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ConfigError(f"unknown Config field(s) {unknown}; the fields are {sorted(fields)}")
    values = {**PRESETS[preset], **RECIPES[recipe], **_VARIANTS[name], **overrides}
    return Config(name=name, preset=preset, **values)


# The converter of files written by an older cipherlab (fields missing, an older checksum or record layout): a
# script of the cipherlab repository, not of the installed package (which has no tools/), named by every refusal
# of such a file (:func:`older`) with where it is.
CONVERTER = "tools/convert_older.py"
CONVERTER_FROM = f"{CONVERTER} from the cipherlab repository"


def older(path, what: str) -> str:
    """The one line that refuses a file an older cipherlab wrote: ``what`` it lacks, and how to convert it."""
    return f"{path}: written by an older cipherlab ({what}); convert it with {CONVERTER_FROM}: python {CONVERTER} {path}"


def lacking_fields(values: dict) -> list[str]:
    """The :class:`Config` fields a stored configuration lacks (none, unless an older cipherlab wrote it)."""
    return [f.name for f in dataclasses.fields(Config) if f.name not in values]


def config_from_dict(values: dict) -> Config:
    """Rebuild a Config saved with :meth:`Config.to_dict` (e.g. read from a checkpoint): every field, none
    left to a default (a field added since would otherwise change what an older file meant).

    >>> config_from_dict(make_config("c2", "cpu").to_dict()) == make_config("c2", "cpu")
    True
    """
    values = {key: value for key, value in values.items() if key != "recipe"}  # a name computed from the fields
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(Config)})
    if unknown:
        raise ConfigError(f"saved configuration has field(s) {unknown} this version of cipherlab does not "
                          "know; use the cipherlab version that wrote it")
    if lacking_fields(values):
        raise ConfigError(f"a configuration written by an older cipherlab (no {', '.join(lacking_fields(values))}); "
                          f"convert its file with {CONVERTER_FROM}")
    return Config(**{**values, "betas": tuple(values["betas"])})


def change_from_c1(components: dict[str, str]) -> str:
    """What ablated components (``Config.components()``, or a results record's ``"components"``) change
    from C1's (:data:`C1_COMPONENTS`), e.g. ``"pos_encoding=rope"``; ``"baseline"`` for C1 itself.

    >>> change_from_c1(make_config("c3").components())
    'attn_type=gqa'
    """
    changed = [f"{k}={v}" for k, v in components.items() if C1_COMPONENTS.get(k) != v]
    return ", ".join(changed) or "baseline"


# Fields whose value must be positive: a run with max_epochs=0 or d_model=0 has nothing to do.
_POSITIVE = ("d_model", "n_heads", "n_kv_heads", "enc_layers", "dec_layers", "ffn_dim", "blt_local_layers",
             "blt_window", "blt_patch_tgt", "blt_max_patch", "chunk_chars", "max_train_lines", "max_eval_lines",
             "token_budget", "max_batch_size", "max_epochs", "patience", "time_budget_s", "eval_every",
             "onset_step")

# The values a number field may take, each checked alone (``Config.__post_init__``, and ``--set`` as it
# is read): {field: (test, what the field is and its range)}. A test is False for NaN.
_RANGES = {
    "phase_shuffle": (lambda v: 0.0 <= v <= 1.0, "a share of the training chunks, 0 to 1"),
    "case_flip": (lambda v: 0.0 <= v <= 1.0, "a probability per letter, 0 to 1"),
    "bpe_dropout": (lambda v: 0.0 <= v < 1.0, "a probability per merge, 0 or more and below 1"),
    "substitution": (lambda v: 0.0 <= v <= 1.0, "a probability per character, 0 to 1"),
    "dropout": (lambda v: 0.0 <= v < 1.0, "a probability per activation, 0 or more and below 1 (1 drops everything)"),
    "label_smoothing": (lambda v: 0.0 <= v < 1.0, "the share of the target probability spread over every token, "
                        "0 (none) or more and below 1"),
    "lr": (lambda v: 0.0 < v < math.inf, "the AdamW peak learning rate, above 0 (e.g. 3e-4)"),
    "weight_decay": (lambda v: 0.0 <= v < math.inf, "AdamW's decoupled weight decay, 0 (none) or more"),
    "grad_clip": (lambda v: v > 0.0, "the largest global gradient norm a step takes, above 0 (at 0 no step "
                  "moves; below 0 the step climbs the loss)"),
    "onset_accuracy": (lambda v: 0.0 < v < 1.0, "a share of the validation tokens, above 0 and below 1"),
    "seed": (lambda v: 0 <= v < 2**32, "0 or more and below 2**32 (NumPy's seeds)"),
    "warmup_steps": (lambda v: v >= 0, "the optimiser steps of linear warm-up, 0 (none) or more"),
    "betas": (lambda v: all(0.0 <= b < 1.0 for b in v), "AdamW's two moment decays, each 0 or more and below 1 "
              "(e.g. 0.9,0.98)"),
    "blt_entropy_percentile": (lambda v: 0.0 <= v <= 100.0, "the percentile of the training entropies above which "
                               "a source patch starts, 0 to 100"),
    "src_vocab": (lambda v: v >= 1, "the source BPE's vocabulary size, 1 or more (at least its specials and base "
                  "symbols), or null for no merges"),
    "tgt_vocab": (lambda v: v >= 1, "the target BPE's vocabulary size, 1 or more (at least its specials and "
                  "characters), or null for no merges"),
}


def _out_of_range(field: str, value) -> str | None:
    """What is wrong with ``value`` for number field ``field`` on its own: its range; None if it is in range."""
    if field in _POSITIVE:
        return None if value is None or value > 0 else f"must be at least 1 (a run with {field} {value} trains nothing)"
    if field in _RANGES:
        if value is None:
            return None  # an optional field (src_vocab=null); _check_types refuses None elsewhere
        test, allowed = _RANGES[field]
        return None if test(value) else allowed
    return None


def _field_kind(field: str) -> tuple[type, bool]:
    """(the base type, whether None is allowed) of a Config field, read from its annotation."""
    annotation = {f.name: f.type for f in dataclasses.fields(Config)}[field]
    text = str(annotation).replace(" ", "")
    optional = text.endswith("|None")
    base = text.removesuffix("|None")
    kinds = {"str": str, "bool": bool, "int": int, "float": float, "tuple[float,float]": tuple}
    return kinds[base], optional


def _kind_text(field: str) -> str:
    kind, optional = _field_kind(field)
    names = {str: "text", bool: "true or false", int: "a whole number", float: "a number",
             tuple: "two numbers, e.g. 0.9,0.98"}
    return names[kind] + (" or null" if optional else "")


def _check_types(config: "Config") -> None:
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        kind, optional = _field_kind(f.name)
        if value is None and optional:
            continue
        ok = (isinstance(value, bool) if kind is bool else
              isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else
              isinstance(value, int) and not isinstance(value, bool) if kind is int else
              isinstance(value, tuple) and len(value) == 2 if kind is tuple else isinstance(value, str))
        if not ok:
            raise ConfigError(f"{f.name}={value!r}: {f.name} takes {_kind_text(f.name)}")


def parse_field(field: str, text: str):
    """The value of ``--set FIELD=TEXT``, parsed by the field's type; a clear error otherwise.

    >>> parse_field("d_model", "128"), parse_field("src_vocab", "null"), parse_field("betas", "0.9,0.98")
    (128, None, (0.9, 0.98))
    """
    fields = {f.name for f in dataclasses.fields(Config)}
    if field not in fields:
        raise ConfigError(f"--set {field}={text}: unknown Config field {field!r}; the fields are {sorted(fields)}")
    kind, optional = _field_kind(field)
    raw = text.strip()
    bad = ConfigError(f"--set {field}={text}: {field} takes {_kind_text(field)}, not {raw!r}")
    if optional and raw.lower() in ("null", "none"):
        return None
    try:
        if kind is bool:
            words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
            return words[raw.lower()]
        if kind is int:
            value = int(raw)
        elif kind is float:
            value = float(raw)
        elif kind is tuple:
            parts = [float(x) for x in raw.strip("()[]").split(",")]
            if len(parts) != 2:
                raise ValueError
            value = tuple(parts)
        else:
            return raw
    except (KeyError, ValueError):
        raise bad from None
    problem = _out_of_range(field, value)
    if problem:
        raise ConfigError(f"--set {field}={text}: {problem}")
    return value


def _check_choice(what: str, value, choices: tuple) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {what} {value!r}: choose one of {', '.join(choices)}")


# C1's four ablated components, from the c1 configuration itself: {"pos_encoding": "sinusoidal", ...}.
C1_COMPONENTS = make_config("c1").components()
