"""C5, the Byte Latent Transformer: patch boundaries, memberships, local attention, pooling,
the patch-causal mask (derived and checked, not trusted), decoding, and bad input."""

from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cipherlab.data.cipher import bits_to_bytes
from cipherlab.pipeline.codec import collate_bytes, collate_source
from cipherlab.base.config import Config
from cipherlab.data.corpus import load_corpus
from cipherlab.pipeline.decode import begin_decoding, decode_step, greedy_decode
from cipherlab.models import blt
from cipherlab.models.attention import MultiHeadAttention
from cipherlab.models.blt import (BLTArgs, BLTModel, ByteEntropyModel, PatchPooling, WindowedSelfAttention,
                                  fixed_patch_membership, patch_causal_mask, patch_membership)
from cipherlab.models.norm import LayerNorm
from cipherlab.models.positional import SinusoidalPositionalEncoding
from cipherlab.models.transformer import Decoder, Encoder
from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS

WINDOW, PATCH = 8, 3  # small, so that every test crosses window and patch edges
TINY = dict(d_model=32, n_heads=4, enc_layers=1, dec_layers=2, ffn_dim=64, dropout=0.0, window=WINDOW,
            patch_tgt=PATCH, max_len=256, local_layers=1, source_memory="bytes", **SPECIAL_IDS)
PERCENTILE, MAX_PATCH = Config.blt_entropy_percentile, Config.blt_max_patch  # C5's


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def corpus_pairs():
    """(plain, cipher bytes) of the training lines of the embedded corpus."""
    plain, cipher = load_corpus().lines("train")
    return [(p, bits_to_bytes(c)) for p, c in zip(plain, cipher)]


@pytest.fixture(scope="module")
def entropy_model(corpus_pairs):
    return ByteEntropyModel().fit([b for _, b in corpus_pairs])


def tiny_blt(**overrides):
    return BLTModel(BLTArgs(**{**TINY, **overrides})).eval()


def random_source(B, L, generator=None):
    """Random cipher bytes (B, L) and random entropy-like patches of at most 5 bytes."""
    src = torch.randint(0, 256, (B, L), generator=generator)
    starts = []
    for _ in range(B):
        gaps = torch.randint(1, 6, (L,), generator=generator).tolist()
        starts.append([s for s in np.cumsum([0] + gaps).tolist() if s < L])
    return src, patch_membership(starts, [L] * B, L)


# --------------------------------------------------------------------------- entropy model


def reference_entropy(train, seq, min_count):
    """H(byte i | context) by plain counting, longest context seen >= min_count times."""
    def entropy(counter):
        n = sum(counter.values())
        return -sum(c / n * np.log2(c / n) for c in counter.values())

    follow = {0: Counter(), 1: {}, 2: {}}
    for s in train:
        for i, b in enumerate(s):
            follow[0][b] += 1
            for k in (1, 2):
                if i >= k:
                    follow[k].setdefault(tuple(s[i - k:i]), Counter())[b] += 1
    curve = []
    for i in range(len(seq)):
        for k in (2, 1, 0):
            counter = follow[0] if k == 0 else follow[k].get(tuple(seq[i - k:i]), Counter())
            if k == 0 or (i >= k and sum(counter.values()) >= min_count):
                curve.append(entropy(counter))
                break
    return np.array(curve)


def test_entropy_curve_counts_like_the_textbook_with_back_off():
    rng = np.random.default_rng(0)
    # a skewed small alphabet, so some contexts are frequent and others rare (back-off)
    train = [rng.choice(6, size=rng.integers(1, 40), p=[0.4, 0.3, 0.15, 0.1, 0.04, 0.01]).tolist()
             for _ in range(30)]
    test = rng.choice(6, size=60).tolist()
    for min_count in (1, 4, 15):
        model = ByteEntropyModel(min_count=min_count).fit(train)
        np.testing.assert_allclose(model.entropy_curve(test), reference_entropy(train, test, min_count), atol=1e-9)


def test_entropy_at_a_position_ignores_that_byte():
    model = ByteEntropyModel(min_count=1).fit([b"abcabcabd"])
    assert model.entropy_curve(b"abc")[2] == model.entropy_curve(b"abd")[2] > 0


def test_threshold_is_the_stated_percentile_of_training_entropies(corpus_pairs, entropy_model):
    curves = np.concatenate([entropy_model.entropy_curve(b) for _, b in corpus_pairs])
    for q in (10, 50, 75, 90):
        assert entropy_model.threshold_at(q) == pytest.approx(np.percentile(curves, q))
    assert np.mean(curves > entropy_model.threshold_at(75)) <= 0.25


# --------------------------------------------------------------------------- patch boundaries


def boundaries_by_loop(curve, threshold, max_patch):
    """The byte-by-byte rule of the course notes (§4.3), as the reference."""
    starts, run = [0], 1
    for i in range(1, len(curve)):
        if curve[i] > threshold or run >= max_patch:
            starts.append(i)
            run = 1
        else:
            run += 1
    return starts


@pytest.mark.parametrize("max_patch", [1, 3, 12])
def test_patch_boundaries_equal_the_loop_and_no_patch_exceeds_max_patch(corpus_pairs, entropy_model, max_patch):
    for q in (25, 75, 100):  # at the 100th percentile only the cap makes boundaries
        threshold = entropy_model.threshold_at(q)
        for _, seq in corpus_pairs[:40]:
            starts = entropy_model.patch_boundaries(seq, threshold, max_patch)
            assert starts == boundaries_by_loop(entropy_model.entropy_curve(seq), threshold, max_patch)
            assert max(np.diff(starts + [len(seq)])) <= max_patch


def test_patch_boundaries_are_deterministic(corpus_pairs, entropy_model):
    again = ByteEntropyModel().fit([b for _, b in corpus_pairs])
    threshold = entropy_model.threshold_at(PERCENTILE)
    assert again.threshold_at(PERCENTILE) == threshold
    for _, seq in corpus_pairs[:20]:
        assert entropy_model.patch_boundaries(seq, threshold, MAX_PATCH) == again.patch_boundaries(seq, threshold, MAX_PATCH)


def test_entropy_boundaries_of_a_prefix_are_a_prefix_of_the_boundaries(corpus_pairs, entropy_model):
    # Why "entropy patches of a growing target would move" is not the reason for fixed target patches.
    threshold = entropy_model.threshold_at(PERCENTILE)
    seq = corpus_pairs[0][1]
    full = entropy_model.patch_boundaries(seq, threshold, MAX_PATCH)
    for n in range(1, len(seq), 7):
        assert entropy_model.patch_boundaries(seq[:n], threshold, MAX_PATCH) == [s for s in full if s < n]


def test_membership_puts_every_real_byte_in_exactly_one_patch(corpus_pairs, entropy_model):
    pairs = corpus_pairs[:5]
    threshold = entropy_model.threshold_at(PERCENTILE)
    batch = collate_bytes([(b, [BOS_ID, *p.encode(), EOS_ID]) for p, b in pairs], entropy_model, threshold,
                          patch_tgt=PATCH)
    src, member, tgt, tgt_member = batch["src"], batch["src_member"], batch["tgt"], batch["tgt_member"]
    assert torch.equal(member.sum(1), (src != PAD_ID).long())  # one patch per real byte, none for PAD
    for row, (_, seq) in enumerate(pairs):
        starts = entropy_model.patch_boundaries(seq, threshold, MAX_PATCH)
        sizes = member[row].sum(-1)
        assert sizes[:len(starts)].tolist() == np.diff(starts + [len(seq)]).tolist()
        assert not sizes[len(starts):].any()
    tgt_in = tgt[:, :-1]
    assert torch.equal(tgt_member, fixed_patch_membership(tgt_in != PAD_ID, PATCH))
    assert tgt_member.shape[1] == tgt_in.shape[1] // PATCH
    assert (tgt_member.sum(-1) <= PATCH).all()


# --------------------------------------------------------------------------- local attention and pooling


def block_diagonal_mask(L, window, pad, causal):
    """(B, 1, L, L) full-length mask that blocks exactly what the windowed layer cannot see."""
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    blocked = (i // window != j // window) | (causal & (j > i))
    return blocked[None, None] | pad[:, None, None, :]


@pytest.mark.parametrize("causal", [False, True])
def test_windowed_attention_equals_full_attention_under_a_block_diagonal_mask(causal):
    layer = WindowedSelfAttention(16, 2, window=4, causal=causal, dropout=0.0).eval()
    x = torch.randn(2, 11, 16)
    pad = torch.zeros(2, 11, dtype=torch.bool)
    pad[1, 8:] = True
    windowed = layer(x, pad)
    full = layer.attn(x, x, x, block_diagonal_mask(11, 4, pad, causal))
    real = ~pad
    torch.testing.assert_close(windowed[real], full[real], atol=1e-6, rtol=1e-5)


def test_windowed_attention_never_scores_more_keys_than_the_window():
    layer = WindowedSelfAttention(16, 2, window=4, causal=True, dropout=0.0)
    shapes = []
    layer.attn.attention.register_forward_hook(lambda m, args, out: shapes.append(args[1].shape))
    layer(torch.randn(3, 37, 16), torch.zeros(3, 37, dtype=torch.bool))
    assert shapes == [torch.Size([3 * 10, 2, 4, 8])]  # (B * windows, H, W, head_dim): never 37 keys


def test_pooling_is_order_sensitive_where_a_mean_is_not():
    pool = PatchPooling(16, 2, dropout=0.0).eval()
    positions = SinusoidalPositionalEncoding(16, dropout=0.0)
    content = torch.randn(1, 8, 16)
    member = patch_membership([[0, 4]], [8], 8)  # patches [0, 4) and [4, 8)
    swapped = content[:, [0, 2, 1, 3, 4, 5, 6, 7]]  # two bytes swapped inside patch 0
    x, x_swapped = positions(content), positions(swapped)

    pooled, _ = pool(x, member)
    pooled_swapped, _ = pool(x_swapped, member)
    assert not torch.allclose(pooled[0, 0], pooled_swapped[0, 0], atol=1e-4)
    torch.testing.assert_close(pooled[0, 1], pooled_swapped[0, 1])  # the other patch is untouched

    def mean(v):
        return v[:, :4].mean(1)

    torch.testing.assert_close(mean(x), mean(x_swapped))  # the "bag of bits" the notes warn about
    # The order sensitivity comes from the positions inside the vectors: permuting whole
    # vectors (content and position together) leaves attention pooling unchanged.
    pooled_permuted, _ = pool(x[:, [0, 2, 1, 3, 4, 5, 6, 7]], member)
    torch.testing.assert_close(pooled, pooled_permuted)


def test_empty_patches_pool_to_zero_and_their_gradients_are_finite():
    pool = PatchPooling(16, 2, dropout=0.0)
    x = torch.randn(2, 6, 16, requires_grad=True)
    member = patch_membership([[0, 2, 5], [0]], [6, 3], 6)  # row 1: one patch of 3 bytes, then padding
    pooled, empty = pool(x, member)
    assert empty.tolist() == [[False, False, False], [False, True, True]]
    assert (pooled[1, 1:] == 0).all() and torch.isfinite(pooled).all()
    pooled.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert (x.grad[1, 3:] == 0).all()  # padding bytes influence nothing


# --------------------------------------------------------------------------- the model


def test_global_stacks_are_the_c1_encoder_and_decoder():
    model = tiny_blt()
    assert type(model.global_encoder) is Encoder and type(model.global_decoder) is Decoder
    for stack in (model.global_encoder, model.global_decoder):
        assert all(type(m) is LayerNorm for m in stack.modules() if "norm" in type(m).__name__.lower())
        attentions = [m for m in stack.modules() if isinstance(m, MultiHeadAttention)]
        assert attentions and all(type(m) is MultiHeadAttention and m.rope is None for m in attentions)
    assert type(model.patch_pos) is SinusoidalPositionalEncoding


def test_each_global_slot_summarises_exactly_the_bytes_the_mask_derivation_assumes():
    # Derive, by perturbing one decoder-input byte at a time, which bytes each global
    # state g_j depends on; byte i may read g_j iff all of them are among bytes 0..i.
    model = tiny_blt()
    Lt = 14
    src, member = random_source(1, 20)
    memory, memory_mask = model.encode(src, member)
    tgt_in = torch.randint(0, 256, (1, Lt))
    _, g = model.global_states(tgt_in, memory, memory_mask)
    K = g.size(1)
    assert K == Lt // PATCH + 1
    depends = [set() for _ in range(K)]
    for p in range(Lt):
        changed = tgt_in.clone()
        changed[0, p] = (changed[0, p] + 1) % 256
        _, g2 = model.global_states(changed, memory, memory_mask)
        for j in torch.nonzero((g2 - g).abs().amax(-1)[0] > 0).flatten().tolist():
            depends[j].add(p)
    assert depends == [set(range(j * PATCH)) for j in range(K)]
    last = [max(d, default=-1) for d in depends]
    allowed = torch.tensor([[last[j] <= i for j in range(K)] for i in range(Lt)])
    assert torch.equal(~patch_causal_mask(Lt, K, PATCH)[0, 0], allowed)


def logits_leak(model, seeds=range(5)):
    """True when some logit at a position <= i changes with a target byte after i."""
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        src, member = random_source(3, 23, gen)
        lengths = [26, 19, 11]  # rows of different length: padding inside the batch
        tgt_in = torch.full((3, 26), PAD_ID)
        for row, n in enumerate(lengths):
            tgt_in[row, 0] = BOS_ID
            tgt_in[row, 1:n] = torch.randint(0, 256, (n - 1,), generator=gen)
        base = model(src, member, tgt_in)
        for i in range(25):
            changed = tgt_in.clone()
            after = torch.zeros_like(tgt_in, dtype=torch.bool)
            after[:, i + 1:] = True
            after &= tgt_in != PAD_ID
            values = torch.randint(0, 258, (int(after.sum()),), generator=gen)
            changed[after] = values.masked_fill(values == PAD_ID, EOS_ID)  # any byte, BOS or EOS
            if not torch.equal(model(src, member, changed)[:, :i + 1], base[:, :i + 1]):
                return True
    return False


def test_logits_never_depend_on_later_target_bytes():
    assert not logits_leak(tiny_blt())


def test_one_more_global_slot_would_leak(monkeypatch):
    # The leak check has teeth: let byte i also read slot (i + 1) // P + 1 and it fires.
    def looser(Lt, K, patch, device=None):
        i = torch.arange(Lt)[:, None]
        j = torch.arange(K)[None, :]
        return (j > (i + 1) // patch + 1)[None, None]

    monkeypatch.setattr(blt, "patch_causal_mask", looser)
    assert logits_leak(tiny_blt(), seeds=range(2))


def test_decoding_a_prefix_gives_the_teacher_forced_logits():
    # What greedy decoding relies on: the logits at i are the same whether the decoder
    # sees the whole target (training) or only the prefix up to i (decoding).
    model = tiny_blt(source_memory="patches")  # the byte-memory default: test_byte_memory_variant_...
    src, member = random_source(2, 23)
    memory, memory_mask = model.encode(src, member)
    tgt_in = torch.cat([torch.full((2, 1), BOS_ID), torch.randint(0, 256, (2, 25))], dim=1)
    full = model.decode(tgt_in, memory, memory_mask)
    for n in range(1, tgt_in.size(1) + 1):
        torch.testing.assert_close(model.decode(tgt_in[:, :n], memory, memory_mask), full[:, :n],
                                   atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("source_memory", ["bytes", "patches"])
@pytest.mark.parametrize("patch_tgt, window", [(4, 8), (3, 5), (1, 2)])
def test_the_decoder_cache_gives_the_logits_of_full_recomputation_byte_by_byte(source_memory, patch_tgt, window):
    # 25 bytes cross window edges and complete patches at several phases; a padded source row;
    # phase embeddings and two local layers so that every cached path is used.
    torch.manual_seed(0)
    model = tiny_blt(source_memory=source_memory, patch_tgt=patch_tgt, window=window, local_layers=2,
                     phase_embedding=True, key_period=8)
    src, member = random_source(2, 23)
    src[1, 19:] = PAD_ID
    member[1, :, 19:] = False
    member = member[:, member.any(-1).any(0)]
    tgt_in = torch.cat([torch.full((2, 1), BOS_ID), torch.randint(0, 256, (2, 24))], dim=1)
    memory, memory_mask, source = model.encode_source(src, member)
    with torch.no_grad():
        full = model.decode(tgt_in, memory, memory_mask, source=source)
        state = begin_decoding(model, src, member)
        steps = torch.stack([decode_step(model, state, tgt_in[:, t]) for t in range(tgt_in.size(1))], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-4)
    assert state.cache.length == 25 and state.cache.slots.size(1) == 25 // patch_tgt + 1
    assert state.cache.self_attn[0].length == (25 - 1) % window + 1  # only the last window's bytes are kept
    assert state.cache.nbytes() > 0


def test_cached_and_recomputed_greedy_decoding_of_the_blt_agree():
    torch.manual_seed(1)
    model = tiny_blt(patch_tgt=3, window=5)
    src, member = random_source(3, 17)
    cached = greedy_decode(model, src, BOS_ID, EOS_ID, 30, src_member=member)
    assert torch.equal(cached, greedy_decode(model, src, BOS_ID, EOS_ID, 30, src_member=member, use_cache=False))
    assert cached.size(1) == 30 and not (cached == PAD_ID).any()  # untrained: no row stops early


def test_tiny_blt_overfits_real_cipher_lines_and_greedy_decoding_reproduces_them(corpus_pairs):
    pairs = [(p, b) for p, b in corpus_pairs if 24 <= len(p) <= 40][:4]
    assert len(pairs) == 4
    entropy = ByteEntropyModel(min_count=2).fit([b for _, b in pairs])
    batch = collate_bytes([(b, [BOS_ID, *p.encode(), EOS_ID]) for p, b in pairs], entropy,
                          entropy.threshold_at(PERCENTILE), patch_tgt=4)
    model = BLTModel(BLTArgs(d_model=64, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=128, dropout=0.0, window=16,
                             patch_tgt=4, max_len=64, local_layers=1, source_memory="bytes", **SPECIAL_IDS))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    tgt_in, tgt_out = batch["tgt"][:, :-1], batch["tgt"][:, 1:]
    losses = []
    for _ in range(100):
        logits = model(batch["src"], batch["src_member"], tgt_in, batch["tgt_member"])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 100

    model.eval()
    encoder_calls = []
    model.local_encoder.register_forward_hook(lambda *args: encoder_calls.append(1))
    out = greedy_decode(model, batch["src"], BOS_ID, EOS_ID, 48, src_member=batch["src_member"])
    assert len(encoder_calls) == 1  # the source is encoded once, then reused at every step
    decoded = [bytes(i for i in row if i < 256).decode("latin-1") for row in out.tolist()]
    assert decoded == [p for p, _ in pairs]
    assert all(EOS_ID in row for row in out.tolist())


# --------------------------------------------------------------------------- bad input


def test_bad_input_is_rejected_with_the_value_and_its_place(entropy_model):
    threshold = entropy_model.threshold_at(PERCENTILE)
    with pytest.raises(ValueError, match="not a multiple of 8"):
        collate_source(["0100100101"], entropy_model, threshold)
    with pytest.raises(ValueError, match="300 at position 2"):
        ByteEntropyModel().fit([[1, 2, 300]])
    with pytest.raises(ValueError, match=f"{PAD_ID} at position 1"):
        entropy_model.patch_boundaries([65, PAD_ID], threshold, MAX_PATCH)
    with pytest.raises(TypeError, match="bits_to_bytes"):
        entropy_model.entropy_curve("0100")
    with pytest.raises(ValueError, match="max_patch=0"):
        entropy_model.patch_boundaries([1, 2], threshold, max_patch=0)
    with pytest.raises(ValueError, match="percentile=101"):
        entropy_model.threshold_at(101)
    with pytest.raises(RuntimeError, match="not fitted"):
        ByteEntropyModel().entropy_curve([1])

    model = tiny_blt()
    src, member = random_source(2, 9)
    src[1, 4] = 300
    with pytest.raises(ValueError, match=r"src\[1, 4\] = 300"):
        model.encode(src, member)
    src[1, 4] = BOS_ID  # a special id is not a cipher byte either
    with pytest.raises(ValueError, match=rf"src\[1, 4\] = {BOS_ID}"):
        model.encode(src, member)
    src[1, 4] = 7
    with pytest.raises(ValueError, match=r"tgt_in\[0, 2\] = 259"):
        model(src, member, torch.tensor([[BOS_ID, 65, 259], [BOS_ID, 66, 67]]))
    with pytest.raises(ValueError, match="tgt_member has shape"):
        model(src, member, torch.tensor([[BOS_ID, 65, 66, 67]] * 2), torch.zeros(2, 2, 4, dtype=torch.bool))
    gappy = torch.zeros(2, 2, 9, dtype=torch.bool)
    gappy[:, 0, [0, 2]] = True  # patch 0 = bytes 0 and 2, skipping byte 1
    gappy[:, 1, [1, 3, 4, 5, 6, 7, 8]] = True
    with pytest.raises(ValueError, match="not a contiguous run"):
        model.encode(src, gappy)


def test_byte_memory_default_does_not_leak_and_decodes_prefixes_as_teacher_forcing():
    model = tiny_blt(source_memory="bytes")
    assert not logits_leak(model, seeds=range(2))
    src, member = random_source(2, 23)
    memory, memory_mask, source = model.encode_source(src, member)
    assert source[0].shape == (2, 23, TINY["d_model"])
    tgt_in = torch.cat([torch.full((2, 1), BOS_ID), torch.randint(0, 256, (2, 17))], dim=1)
    full = model.decode(tgt_in, memory, memory_mask, source=source)
    for n in (1, 5, 18):
        torch.testing.assert_close(model.decode(tgt_in[:, :n], memory, memory_mask, source=source), full[:, :n],
                                   atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="source="):
        model.decode(tgt_in, memory, memory_mask)
    with pytest.raises(ValueError, match="source_memory"):
        tiny_blt(source_memory="words")
    assert not logits_leak(tiny_blt(source_memory="patches"), seeds=range(1))


# --------------------------------------------------------------------------- BLTArgs: the one way to build it

def test_blt_args_are_frozen_named_and_compare_by_value():
    import dataclasses

    args = BLTArgs(**TINY)
    assert args == BLTArgs(**TINY) and hash(args) == hash(BLTArgs(**TINY))
    assert args != BLTArgs(**{**TINY, "patch_tgt": 4})
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.window = 16
    with pytest.raises(TypeError):  # keyword-only: no silent reordering of the sizes
        BLTArgs(32, 4)
    with pytest.raises(TypeError, match="local_layers"):  # the C5-only sizes and special ids have no default
        BLTArgs(d_model=32)
    assert tiny_blt().args == args


def test_build_model_gives_the_blt_the_args_its_config_asks_for():
    from cipherlab.base.config import make_config
    from cipherlab.pipeline.codec import build_model

    config = make_config("c5", "smoke")
    model = build_model(config)
    assert isinstance(model, BLTModel)
    assert model.args == BLTArgs(
        d_model=config.d_model, n_heads=config.n_heads, enc_layers=config.enc_layers, dec_layers=config.dec_layers,
        ffn_dim=config.ffn_dim, dropout=config.dropout, local_layers=config.blt_local_layers,
        window=config.blt_window, patch_tgt=config.blt_patch_tgt, source_memory=config.blt_source_memory,
        pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID, bit_embeddings=config.bit_embeddings,
        phase_embedding=config.phase_embedding, key_period=8)


@pytest.mark.parametrize("call", [
    lambda: BLTModel(**TINY),
    lambda: BLTModel(BLTArgs(**TINY), window=16),
], ids=["keywords", "args-and-keywords"])
def test_anything_but_one_blt_args_is_a_type_error(call):
    with pytest.raises(TypeError):
        call()
