"""The training chapter's experiments: what its cells call and print, and what its facts quote.

Every function runs cipherlab's own code (``cipherlab.models.transformer``, ``cipherlab.pipeline.train``,
``cipherlab.data.corpus``); the training chapter calls the same functions, so the book and the answers agree.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.pipeline.codec import build_model, fit_codec, select_lines
from cipherlab.base.config import TOKENIZATIONS, make_config
from cipherlab.data.corpus import (CHUNK_CHARS, BucketBatchSampler, ByteChunkDataset, load_corpus, make_chunks, padding_waste,
                                   shuffle_chunks)
from cipherbook.experiments.common import sinusoidal_table
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer
from cipherlab.pipeline.train import WarmupInverseSqrt, make_optimizer

# the course notes' model: their BPE sizes, free embedding rows (built without a codec); the preset's schedule
NOTES_SIZES = make_config("c1", "assignment", recipe="notes", **TOKENIZATIONS["notes"])
SMOOTHING = NOTES_SIZES.label_smoothing  # 0.1
SAMPLE_LINES = 400  # training lines of the bucketing sample measured in BPE tokens
CONFIDENT_MARGIN = 20.0  # logit of the correct token minus every other logit, for the label-smoothing demo


# --------------------------------------------------------------------------- weight tying

@functools.lru_cache(maxsize=1)
def assignment_model() -> Seq2SeqTransformer:
    """A freshly initialised C1 model at the assignment's sizes with the course notes' BPE vocabularies, seeded."""
    torch.manual_seed(0)
    return build_model(NOTES_SIZES, vocab_sizes=(NOTES_SIZES.src_vocab, NOTES_SIZES.tgt_vocab), pad_id=0)


@functools.lru_cache(maxsize=1)
def preset_codec():
    """The codec of the assignment preset as students train it (C1, aligned BPE): its tokenizers learned
    from the preset's training lines (about 15 s on a CPU; C1-C4 share it)."""
    config = make_config("c1", "assignment")
    return fit_codec(config, select_lines(load_corpus(), config))


@functools.lru_cache(maxsize=1)
def preset_model() -> Seq2SeqTransformer:
    """A freshly initialised C1 of the assignment preset as students train it (bit-factored embeddings), seeded."""
    torch.manual_seed(0)
    return preset_codec().build_model(make_config("c1", "assignment"))


def tying_saves() -> int:
    """Parameters an untied output head (a separate tgt_vocab x d_model matrix, no bias) would add."""
    return NOTES_SIZES.tgt_vocab * NOTES_SIZES.d_model


def layer_ffn_shares() -> dict:
    """FFN share of one encoder layer's and one decoder layer's parameters (assignment C1, layer 0)."""
    model = assignment_model()
    shares = {}
    for side, layer in (("encoder", model.encoder.layers[0]), ("decoder", model.decoder.layers[0])):
        total = sum(p.numel() for p in layer.parameters())
        shares[side] = sum(p.numel() for p in layer.ffn.parameters()) / total
    return shares


# --------------------------------------------------------------------------- cross-attention's cache

def decode_batch_sizes() -> dict:
    """The largest batch the assignment preset decodes: "rows", ``decrypt_chunks``' default ``max_batch_size``
    (its token budget admits that many chunks of the preset), and "positions", the most tokens a side of one
    of its chunks (``chunk_chars`` characters, each token at least one, plus BOS or the end-of-source token)."""
    import inspect

    from cipherlab.pipeline.decode import decrypt_chunks

    defaults = {k: v.default for k, v in inspect.signature(decrypt_chunks).parameters.items()}
    positions = make_config("c1", "assignment").chunk_chars + 1
    assert defaults["token_budget"] >= defaults["max_batch_size"] * positions
    return {"rows": defaults["max_batch_size"], "positions": positions}


@functools.lru_cache(maxsize=None)
def decode_cache_mb(batch: int = 64, tgt_length: int = 256, src_length: int = 256) -> dict:
    """The multi-head attention chapter's decode cache in MB (``mha.cache_by_module``: the assignment's model sizes;
    by default a batch of 64, targets and sources of 256 tokens; float32): "c1_self" and "c3_self", the
    decoder self-attention cache of C1 and C3; "cross", the cross-attention keys and values of the memory
    (MHA in both, so equal); "cross_gqa", what those would take with C3's grouping of key/value heads."""
    from cipherbook.experiments.mha import cache_by_module

    c1, c3 = cache_by_module("C1", batch, tgt_length, src_length), cache_by_module("C3", batch, tgt_length, src_length)
    cross = c1["decoder cross-attention"]
    assert c3["decoder cross-attention"] == cross  # cross-attention is MHA in C3 too
    c3_config = make_config("c3", "assignment")
    groups = c3_config.n_heads // c3_config.n_kv_heads
    assert c1["decoder self-attention"] == groups * c3["decoder self-attention"]
    return {"c1_self": c1["decoder self-attention"] / 1e6, "c3_self": c3["decoder self-attention"] / 1e6,
            "cross": cross / 1e6, "cross_gqa": cross / groups / 1e6}


# --------------------------------------------------------------------------- initialisation

def init_scales(embed_std: float, batch: int = 4, length: int = 64, seed: int = 0) -> dict:
    """What the embedding init does at the model's first steps, for embedding weights ~ N(0, embed_std^2).

    "embed_over_pe": std of table(ids) * sqrt(d) divided by the RMS of the sinusoidal table it is added to;
    "logit_std": std of the initial logits (tied head); "max_prob": mean over positions of the
    largest softmax probability; "loss": initial cross-entropy on random targets.

    Everything random is drawn from ``seed``: the model's other weights under ``torch.manual_seed(seed)``
    in a forked random state (the caller's state is left as it was), so the training chapter and the drill,
    which run different code before it, print the same numbers.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_model(dataclasses.replace(NOTES_SIZES, dropout=0.0),
                            vocab_sizes=(NOTES_SIZES.src_vocab, NOTES_SIZES.tgt_vocab), pad_id=0)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for table in (model.src_embed, model.tgt_embed):
            table.weight.normal_(0.0, embed_std, generator=g)
        src = torch.randint(3, NOTES_SIZES.src_vocab, (batch, length), generator=g)  # (B, Ls), no PAD
        tgt = torch.randint(3, NOTES_SIZES.tgt_vocab, (batch, length + 1), generator=g)  # (B, Lt+1)
        scaled = model.tgt_embed(tgt) * math.sqrt(model.d_model)  # (B, Lt+1, D)
        pe_rms = sinusoidal_table(model.d_model, length).pow(2).mean().sqrt()
        logits = model(src, tgt[:, :-1])  # (B, Lt, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
    return {"embed_over_pe": (scaled.std() / pe_rms).item(), "logit_std": logits.std().item(),
            "max_prob": logits.softmax(-1).max(-1).values.mean().item(), "loss": loss.item()}


# --------------------------------------------------------------------------- label smoothing

def confident_loss(margin: float, smoothing: float, vocab: int | None = None) -> float:
    """Cross-entropy when the correct token's logit beats every other (equal) logit by ``margin``."""
    vocab = vocab or NOTES_SIZES.tgt_vocab
    logits = torch.zeros(1, vocab, dtype=torch.float64)
    logits[0, 0] = margin
    return F.cross_entropy(logits, torch.tensor([0]), label_smoothing=smoothing).item()


def best_margin(smoothing: float = SMOOTHING, vocab: int | None = None) -> float:
    """The margin that minimises the smoothed loss: log of p(correct) / p(other) in PyTorch's target.

    PyTorch's target puts 1 - eps + eps/V on the correct token and eps/V on each of the others.
    """
    vocab = vocab or NOTES_SIZES.tgt_vocab
    return math.log((1 - smoothing + smoothing / vocab) / (smoothing / vocab))


# --------------------------------------------------------------------------- warm-up and Adam

def adam_first_step(seed: int = 0) -> dict:
    """One AdamW step (weight decay off) on a small cipherlab model: how far each weight moved, over lr.

    "move_median": median |delta| / lr over weights with a non-zero gradient (Adam's first step is
    lr * g / |g|, so about 1 whatever the gradient's size); "grad_spread": the 90th over the 10th
    percentile of those |gradients|.
    """
    torch.manual_seed(seed)
    model = Seq2SeqTransformer(ModelArgs(64, 64, d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64,
                                         dropout=0.0))
    config = make_config("c1", "smoke", weight_decay=0.0)
    optimizer = make_optimizer(model, config)
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(3, 64, (8, 20), generator=g), torch.randint(3, 64, (8, 21), generator=g)
    before = [p.detach().clone() for p in model.parameters()]
    F.cross_entropy(model(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten()).backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()]).abs()
    optimizer.step()
    moves = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)]).abs()
    used = grads > 0
    ratio = moves[used] / config.lr
    q = torch.quantile(grads[used], torch.tensor([0.1, 0.9]))
    return {"move_median": ratio.median().item(), "grad_spread": (q[1] / q[0]).item()}


def adam_v_samples(step: int, beta2: float = NOTES_SIZES.betas[1]) -> float:
    """How many gradients AdamW's bias-corrected second moment effectively averages after ``step`` steps.

    Gradient i of t carries the weight beta2^(t - i); the effective count is (sum of weights)^2 over
    the sum of squared weights: 1 on the first step, (1 + beta2) / (1 - beta2) in steady state.
    """
    weights = [beta2 ** (step - i) for i in range(1, step + 1)]
    return sum(weights) ** 2 / sum(w * w for w in weights)


def adam_v_steady(beta2: float = NOTES_SIZES.betas[1]) -> float:
    return (1 + beta2) / (1 - beta2)


def adam_v_settle_step(share: float = 0.95, beta2: float = NOTES_SIZES.betas[1]) -> int:
    """The first step at which the second moment averages ``share`` of its steady-state count of gradients."""
    step = 1
    while adam_v_samples(step, beta2) < share * adam_v_steady(beta2):
        step += 1
    return step


def norm_gains_at_init() -> float:
    """The value every LayerNorm gain of a fresh C1 starts at (an error if they differ)."""
    from cipherlab.models.norm import LayerNorm

    gains = torch.cat([m.gamma.detach().flatten() for m in assignment_model().modules() if isinstance(m, LayerNorm)])
    if not bool((gains == gains[0]).all()):
        raise ValueError("the LayerNorm gains of a fresh model differ")
    return gains[0].item()


def lr_factor(step: int, warmup_steps: int | None = None) -> float:
    """The scheduler's factor on the peak learning rate at optimiser step ``step`` (1-based)."""
    return WarmupInverseSqrt(warmup_steps or NOTES_SIZES.warmup_steps)(step - 1)


# --------------------------------------------------------------------------- a gradient spike into AdamW

def adam_spike(clip: bool, factor: float = 100.0, betas: tuple = NOTES_SIZES.betas, steps: int = 600,
               spike_at: int = 100, n: int = 1000, seed: int = 0) -> dict:
    """AdamW (cipherlab's betas, lr 1e-3, no weight decay) on one vector of ``n`` weights.

    Every step's gradient is a fixed drift plus noise with a norm of about 0.5, under the clip
    threshold; at step ``spike_at`` it is ``factor`` times larger. With ``clip`` the global norm
    is clipped at ``NOTES_SIZES.grad_clip`` first, as ``Trainer._step`` does. Returns "sizes", the
    mean |update| / lr of every step; "before", its mean over the 50 steps before the spike;
    "at_spike" and "max_at_spike" (the mean and the largest coordinate's |update| / lr at the
    spike); "damped", how many steps after the spike update by less than 90 % of "before"; "m" and
    "v", AdamW's moment estimates after every step (the mean |exp_avg| and the mean exp_avg_sq,
    before bias correction).
    """
    g = torch.Generator().manual_seed(seed)
    w = nn.Parameter(torch.zeros(n))
    lr = 1e-3
    optimizer = torch.optim.AdamW([w], lr=lr, betas=betas, weight_decay=0.0)
    drift = torch.randn(n, generator=g)
    sizes, first, second, max_at_spike = [], [], [], 0.0
    for step in range(steps):
        grad = (drift + torch.randn(n, generator=g)) * (0.5 / math.sqrt(2 * n))  # norm about 0.5
        w.grad = grad * factor if step == spike_at else grad
        if clip:
            nn.utils.clip_grad_norm_([w], NOTES_SIZES.grad_clip)
        before = w.detach().clone()
        optimizer.step()
        move = (w.detach() - before).abs() / lr
        sizes.append(move.mean().item())
        state = optimizer.state[w]
        first.append(state["exp_avg"].abs().mean().item())
        second.append(state["exp_avg_sq"].mean().item())
        if step == spike_at:
            max_at_spike = move.max().item()
    base = sum(sizes[spike_at - 50:spike_at]) / 50
    return {"sizes": sizes, "m": first, "v": second, "before": base, "at_spike": sizes[spike_at],
            "max_at_spike": max_at_spike, "damped": sum(size < 0.9 * base for size in sizes[spike_at + 1:])}


# --------------------------------------------------------------------------- what a loss is compared with

def unigram_baseline(codec, corpus, chunk_chars: int) -> dict:
    """The loss a model reaches that knows only how often each target token occurs (nats per token).

    "train_entropy": the unigram entropy of the training chunks' target tokens (EOS included,
    BOS not: what the loss predicts); "val_cross_entropy": the validation targets scored with
    those training frequencies (add-0.5 smoothing for tokens the training chunks never hold);
    "ln_v": ln of the target vocabulary, the loss of uniform guessing.
    """
    counts = {}
    for split in ("train", "val"):
        chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits[split], chunk_chars)
        counts[split] = Counter(t for _, tgt in codec.dataset(chunks) for t in list(tgt)[1:])
    n_train, vocab = sum(counts["train"].values()), codec.tgt.vocab_size
    entropy = -sum(c / n_train * math.log(c / n_train) for c in counts["train"].values())
    def log_p(t):
        return math.log((counts["train"][t] + 0.5) / (n_train + 0.5 * vocab))
    n_val = sum(counts["val"].values())
    cross = -sum(c * log_p(t) for t, c in counts["val"].items()) / n_val
    return {"train_entropy": entropy, "val_cross_entropy": cross, "ln_v": math.log(vocab)}


def unigram_accuracy(codec, corpus, chunk_chars: int) -> float:
    """Teacher-forced token accuracy of always guessing the training chunks' most frequent target token,
    on ``corpus``'s validation chunks (EOS included, BOS not): the level a curve starts from."""
    counts = {}
    for split in ("train", "val"):
        chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits[split], chunk_chars)
        counts[split] = Counter(t for _, tgt in codec.dataset(chunks) for t in list(tgt)[1:])
    top = counts["train"].most_common(1)[0][0]
    return counts["val"][top] / sum(counts["val"].values())


# --------------------------------------------------------------------------- Pre-LN vs Post-LN, no warm-up

def warmup_contrast(wiring: str, depth: int = 12, steps: int = 60, lr: float = 3e-3, warmup: int = 0,
                    seed: int = 0) -> list[float]:
    """Training losses of a ``depth``-layer encoder stack (the normalisation chapter's ``build_stack``) on a toy task.

    The task: 10 random classes per position on a fixed batch of 4 x 16 unit-scale inputs (ln 10 is
    chance). AdamW with cipherlab's betas at a constant ``lr`` after a linear ``warmup`` (0: none).
    """
    from cipherbook.experiments.norm import SMALL, build_stack, toy_batch

    layers, final = build_stack(wiring, depth, seed)
    torch.manual_seed(seed)
    head = nn.Linear(SMALL["d_model"], 10)
    params = [*layers.parameters(), *final.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=NOTES_SIZES.betas, weight_decay=0.0)
    x, y = toy_batch(batch=4, length=16)
    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
        h = x
        for layer in layers:
            h = layer(h)
        loss = F.cross_entropy(head(final(h)).flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# --------------------------------------------------------------------------- planning the GPU run

PLAN_CONFIGS = ("c1", "c3", "c5")  # C2 and C4 have C1's sizes and FLOPs
PLAN_GPUS = ("L4", "A100", "H100")  # a T4 has no bf16, which cipherlab autocasts to
# The CPU time charged per kernel launch in the book's plan: an assumption, stated, so the chapter's
# figures do not move with the load of the machine that builds it (`plan` measures the machine's own).
PLAN_LAUNCH_US = 20.0


@functools.lru_cache(maxsize=1)
def gpu_plan(configs: tuple = PLAN_CONFIGS, gpus: tuple = PLAN_GPUS) -> dict:
    """``cipherlab.analysis.plan`` for the students' run, as ``python -m cipherlab plan --preset assignment``
    plans it (the preset's own recipe, tokenisation and batches): the step costs measured once on this CPU
    ("plan", as ``plan_preset`` returns it), then every GPU's estimate of each configuration
    ("gpus": {gpu: {config: ``gpu_estimate``}}), at the planner's default utilisation and session and
    ``PLAN_LAUNCH_US`` per kernel launch."""
    from cipherlab.analysis import plan as planner

    plan = planner.plan_preset("assignment", planner.GPUS[gpus[0]], configs=configs, launch_us=PLAN_LAUNCH_US)
    estimates = {gpu: {r["config"]: planner.gpu_estimate(r, planner.GPUS[gpu], plan["mfu"], plan["hours"],
                                                         plan["sizes"]["max_epochs"], PLAN_LAUNCH_US)
                       for r in plan["configs"]}
                 for gpu in gpus}
    return {"plan": plan, "gpus": estimates}


# --------------------------------------------------------------------------- bucketing

@functools.lru_cache(maxsize=1)
def training_byte_lengths() -> tuple[int, ...]:
    """Source lengths of every training chunk (CHUNK_CHARS characters at most), in bytes."""
    corpus = load_corpus()
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], CHUNK_CHARS)
    return tuple(ByteChunkDataset(chunks).src_lengths)


@functools.lru_cache(maxsize=1)
def sample_lengths(n_lines: int = SAMPLE_LINES) -> dict:
    """Source lengths of the chunks of the first ``n_lines`` training lines: in bytes, and in BPE tokens.

    The BPE tokens are those of the ``smoke`` preset's bits-mode source tokenizer (small and quick
    to learn; the course notes' 1024-token one is far slower to learn and encode on a CPU).
    """
    corpus = load_corpus()
    smoke = make_config("c1", "smoke", recipe="notes")  # no end-of-source token: tokens of the cipher alone
    codec = fit_codec(smoke, select_lines(corpus, smoke))
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"][:n_lines], CHUNK_CHARS)
    return {"bytes": tuple(ByteChunkDataset(chunks).src_lengths),
            "bpe": tuple(len(codec.encode_source(c.cipher)) for c in chunks)}


def random_batches(sizes: list[int], n: int, seed: int = 0) -> list[list[int]]:
    """Random batches with the given sizes (as DataLoader(shuffle=True) would make them)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    batches, start = [], 0
    for size in sizes:
        batches.append(order[start:start + size])
        start += size
    return batches


def waste(lengths, token_budget: int = NOTES_SIZES.token_budget, max_batch_size: int = NOTES_SIZES.max_batch_size,
          seed: int = 0) -> dict:
    """Padding waste of BucketBatchSampler's batches and of random batches of the same sizes."""
    bucketed = BucketBatchSampler(lengths, token_budget, max_batch_size, seed=seed).epoch_batches(0)
    shuffled = random_batches([len(b) for b in bucketed], len(lengths), seed)
    return {"bucketed": padding_waste(lengths, bucketed), "random": padding_waste(lengths, shuffled),
            "batches": len(bucketed), "examples": len(lengths),
            "full_share": sum(n == max(lengths) for n in lengths) / len(lengths)}


@functools.lru_cache(maxsize=1)
def preset_waste() -> dict:
    """Padding waste of the assignment preset's own training batches (C1, aligned BPE), built as ``train_config``
    builds them: the training lines cut into ``chunk_chars``-character chunks, phase-shuffled and case-flipped
    (``shuffle_chunks``), encoded by the preset's codec with BPE-dropout, batched by ``BucketBatchSampler``
    under the preset's token budget and batch cap; against random batches of the same sizes (:func:`waste`).
    Adds "lengths", the source lengths in tokens (the end-of-source token included). About 10 s after
    :func:`preset_codec`."""
    config = make_config("c1", "assignment")
    corpus = select_lines(load_corpus(), config)
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], config.chunk_chars)
    chunks = shuffle_chunks(chunks, config.phase_shuffle, config.seed, config.case_flip, config.substitution)
    lengths = tuple(preset_codec().dataset(chunks, dropout=config.bpe_dropout, seed=config.seed).src_lengths)
    return {**waste(lengths, config.token_budget, config.max_batch_size, config.seed), "lengths": lengths}


# --------------------------------------------------------------------------- the recipe's parts

RECIPE_SETS = ("random_letters", "random_alphabet", "test_free")  # the probe sets the recipe table scores
RECIPE_SET_NAMES = {"random_letters": "letters", "random_alphabet": "alphabet", "test_free": "Brown free"}


@functools.lru_cache(maxsize=1)
def recipe_summary() -> dict:
    """The recipe ablation's headline (``cpu`` preset, as the training chapter's recipe cell computes it), each
    part against the reference ablation (``results/reference``, every part on): "lost": {part: the most exact
    lines one C1 or C2 run without that part lost on one of ``RECIPE_SETS``} (``results/recipe``,
    ``results/nophase``); "p": {part: McNemar's exact p of that run on that set against the reference};
    "where": {part: that run and set, "C2 s1 · alphabet"}; "of": {part: the exact lines the reference run
    decoded on that set}; "others": {part: the most any other C1 or C2 run lost on one of ``RECIPE_SETS``};
    "aware": {part: the lines that run lost on Brown decoded length-aware}; "scale": the epochs, the
    minutes of training allowed and the torch threads of every run (one of each, or an error)."""
    from cipherlab.analysis import ablation
    from cipherbook.runs import RECIPE_FOLDERS, REFERENCE_RUN

    costs, full = ablation.load_recipe_runs(RECIPE_FOLDERS), ablation.load_learn_runs(REFERENCE_RUN)

    def loss(key, run, s):
        return ablation.section(full[key], s)["exact_lines"] - ablation.section(run, s)["exact_lines"]

    lost, p, where, of, others, aware = {}, {}, {}, {}, {}, {}
    for part, runs in costs.items():
        pairs = [(key, s) for key in runs if key[0] in ("c1", "c2") for s in RECIPE_SETS]
        key, s = max(pairs, key=lambda pair: loss(pair[0], runs[pair[0]], pair[1]))
        x, y = ablation.section(full[key], s), ablation.section(runs[key], s)
        lost[part] = x["exact_lines"] - y["exact_lines"]
        p[part] = ablation.mcnemar(x["exact_by_line"], y["exact_by_line"])[2]
        where[part] = f"{key[0].upper()} s{key[1]} · {RECIPE_SET_NAMES[s]}"
        of[part] = x["exact_lines"]
        others[part] = max(loss(k, runs[k], t) for k, t in pairs if k != key)
        aware[part] = loss(key, runs[key], "test")
    scale = {(r["epochs"], r["hyperparameters"]["time_budget_s"] / 60, r["versions"]["threads"])
             for runs in (full, *costs.values()) for r in runs.values()}
    if len(scale) != 1:
        raise ValueError(f"the recipe ablation's runs trained at different scales (epochs, minutes, threads): {scale}")
    return {"lost": lost, "p": p, "where": where, "of": of, "others": others, "aware": aware,
            "scale": dict(zip(("epochs", "minutes", "threads"), scale.pop()))}


def case_flip_upper(config: str = "c1", seed: int = 1) -> dict:
    """The upper-case docstrings (``stdlib_upper``, outside ``RECIPE_SETS``) of one run without the case flip
    (``results/recipe/no-case-flip``) and of the same run with every part on (``results/reference``):
    {"without": exact lines, "with": exact lines, "lines": lines of the set, "p": McNemar's exact p}."""
    from cipherbook.runs import RECIPE_FOLDERS, REFERENCE_RUN
    from cipherlab.analysis import ablation

    without = ablation.section(ablation.load_recipe_runs(RECIPE_FOLDERS)["case_flip"][(config, seed)], "stdlib_upper")
    with_it = ablation.section(ablation.load_learn_runs(REFERENCE_RUN)[(config, seed)], "stdlib_upper")
    if without["lines"] != with_it["lines"]:
        raise ValueError(f"{config} seed {seed}: the upper-case sets differ ({without['lines']}, {with_it['lines']} lines)")
    return {"without": without["exact_lines"], "with": with_it["exact_lines"], "lines": without["lines"],
            "p": ablation.mcnemar(with_it["exact_by_line"], without["exact_by_line"])[2]}


def case_flip_upper_others(config: str = "c1", seed: int = 1) -> int:
    """The most upper-case docstring lines any other C1 or C2 run without the case flip differs by, lost or
    gained, from the same run with every part on (``case_flip_upper`` for each)."""
    from cipherbook.runs import RECIPE_FOLDERS
    from cipherlab.analysis import ablation

    runs = ablation.load_recipe_runs(RECIPE_FOLDERS)["case_flip"]
    return max(abs(r["with"] - r["without"]) for r in (case_flip_upper(*key) for key in runs
                                                        if key[0] in ("c1", "c2") and key != (config, seed)))


def recipe_seeds() -> int:
    """How many seeds of C1 and of C2 each part of the recipe ablation (``results/recipe``, ``results/nophase``)
    trained: one number, or an error if the parts or the two configurations differ."""
    from cipherlab.analysis import ablation
    from cipherbook.runs import RECIPE_FOLDERS

    counts = {(part, config): sum(key[0] == config for key in runs)
              for part, runs in ablation.load_recipe_runs(RECIPE_FOLDERS).items() for config in ("c1", "c2")}
    if len(set(counts.values())) != 1:
        raise ValueError(f"the recipe ablation's seeds differ by part or configuration: {counts}")
    return next(iter(counts.values()))


# --------------------------------------------------------------------------- the run sheet

def assignment_search():
    """``benchmarks/assignment_search.py`` as a module: the measured curves behind the assignment preset."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "assignment_search.py"
    spec = importlib.util.spec_from_file_location("assignment_search", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def long_chunk_run() -> dict:
    """C1 at the assignment preset with the course notes' ``CHUNK_CHARS``-character chunks
    (``benchmarks/results/assignment_search``): its run, with its file's name and how it was measured
    ("eval_every", "eval_lines", "threads", "os_cpus", "shared_with")."""
    import json

    search = assignment_search()
    for path in sorted(search.FOLDER.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for run in record["runs"]:
            if run["config"] == "c1" and run["hyperparameters"]["chunk_chars"] == CHUNK_CHARS:
                how = {key: record[key] for key in ("eval_every", "eval_lines", "threads", "os_cpus", "shared_with")}
                return {**run, **how, "file": path.name}
    raise ValueError(f"{search.FOLDER}: no C1 run with {CHUNK_CHARS}-character chunks")


def preset_curves() -> dict[str, dict]:
    """{configuration: its run at the assignment preset's own settings}: curve, seconds per step, parameters."""
    search = assignment_search()
    return {run["config"]: run for run in search.runs() if search.at_preset(run)}
