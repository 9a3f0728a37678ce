"""The broken-models chapter's broken variants: each is caught by the check the chapter uses, and the real module passes it.

If a check stopped telling the two apart (a refactor of the real module, a weaker measurement),
the chapter's claim "this measurement catches that bug" would silently rot; these tests fail instead.
The thresholds are the chapter's own asserts.
"""

import math

import pytest
import torch

from cipherbook import broken
from cipherlab.data.corpus import load_corpus, make_chunks
from cipherlab.models.attention import MultiHeadAttention, ScaledDotProductAttention
from cipherlab.models.blt import PatchPooling
from cipherlab.models.positional import RotaryPositionalEmbedding
from cipherlab.data.tokenizers.bytes import PAD_ID, VOCAB_SIZE
from cipherlab.pipeline.train import sequence_loss
from cipherbook.viva import REPO_ROOT, notebook_in_sync


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_no_causal_mask_lets_earlier_logits_see_later_tokens():
    assert broken.future_leak(broken.tiny()) == 0.0
    assert broken.future_leak(broken.tiny(broken.NoCausalMask)) > 0.1


def test_no_causal_mask_trains_to_copy_and_then_fails_to_decode():
    real = broken.train_and_decode(broken.tiny())
    bad = broken.train_and_decode(broken.tiny(broken.NoCausalMask))
    assert bad["teacher_forced_loss"] < real["teacher_forced_loss"] - 1
    assert bad["teacher_forced_acc"] > 0.4 and bad["greedy_acc"] < 1.5 / 26
    assert abs(real["teacher_forced_acc"] - real["greedy_acc"]) < 0.05


def test_softmax_over_queries_differs_from_the_oracle_and_leaks_the_future():
    assert broken.sdpa_gap(ScaledDotProductAttention()) < 1e-5
    assert broken.sdpa_gap(broken.SoftmaxOverQueries()) > 0.1
    assert broken.attention_future_leak(ScaledDotProductAttention()) == 0.0
    assert broken.attention_future_leak(broken.SoftmaxOverQueries()) > 0.1


def test_unscaled_attention_differs_from_the_oracle_and_saturates_at_large_d():
    assert broken.sdpa_gap(broken.Unscaled()) > 0.1
    assert broken.attention_future_leak(broken.Unscaled()) == 0.0  # still causal: only the oracle sees it
    real, bad = broken.saturation(ScaledDotProductAttention(), 512), broken.saturation(broken.Unscaled(), 512)
    assert bad["max_weight"] > 0.9 > 0.2 > real["max_weight"] and bad["jacobian"] < real["jacobian"] / 2


def test_unmasked_padding_changes_the_outputs_with_the_pad_length():
    assert broken.padding_gap(broken.tiny()) < 1e-4
    assert broken.padding_gap(broken.tiny(broken.UnmaskedPadding)) > 0.1


def test_cross_attention_without_rope_reads_the_memory_as_a_set():
    assert broken.memory_permutation_gap(broken.tiny(pos_encoding="rope")) > 0.1
    assert broken.memory_permutation_gap(broken.c2_without_cross_positions()) < 1e-4


def test_mean_pooling_forgets_the_order_inside_a_patch():
    assert broken.pooling_swap_gap(PatchPooling(32, 4, dropout=0.0)) > 1e-3
    assert broken.pooling_swap_gap(broken.MeanPooling(32, 4, dropout=0.0)) < 1e-6


def test_chunks_of_253_encrypt_one_slot_with_several_key_bytes():
    plain, cipher = load_corpus().lines("train")
    lines = range(200)
    assert broken.masks_per_slot(make_chunks(plain, cipher, lines)) == 1
    assert broken.masks_per_slot(broken.chunks_253(plain, cipher, lines)) > 1
    assert broken.masks_per_slot(broken.chunks_253(plain, cipher, lines, chunk_chars=256)) == 1


def test_default_embedding_init_drowns_the_positions_and_blows_up_the_first_loss():
    real = broken.init_scale(broken.tiny(d_model=256, n_heads=8))
    bad = broken.init_scale(broken.tiny(broken.DefaultEmbeddingInit, d_model=256, n_heads=8))
    assert real["embed_rms"] < 2 * real["position_rms"] and bad["embed_rms"] > 10 * bad["position_rms"]
    assert bad["first_loss"] > 10 * real["first_loss"]


def test_rope_on_values_breaks_shift_invariance():
    rope = RotaryPositionalEmbedding(8, 128)
    assert broken.shift_gap(MultiHeadAttention(32, 4, dropout=0.0, rope=rope)) < 1e-5
    assert broken.shift_gap(broken.RopeOnValues(32, 4, rope)) > 0.05


def test_own_patch_mask_leaks_the_answer_and_the_real_mask_does_not():
    assert broken.blt_answer_leak(broken.tiny_blt()) == 0.0
    assert broken.blt_answer_leak(broken.tiny_blt(broken.OwnPatchBLT)) == pytest.approx(0.75)


def test_unshifted_targets_put_every_answer_in_the_input():
    assert broken.answer_in_input(broken.teacher_forcing_pair) == 0.0
    assert broken.answer_in_input(broken.unshifted_pair) == 1.0


def test_unshifted_training_copies_its_input_and_decodes_nothing():
    run = broken.train_and_decode(broken.tiny(), steps=broken.SHIFT_STEPS, pair=broken.unshifted_pair)
    assert run["train_loss"] < 0.05 and run["greedy_acc"] == 0.0
    assert run["teacher_forced_loss"] > math.log(VOCAB_SIZE)


def test_pad_in_the_loss_makes_a_lines_loss_depend_on_its_batch():
    real, bad = broken.pad_loss_gap(broken.masked_loss), broken.pad_loss_gap(broken.loss_counting_pad)
    assert real["gap"] < 1e-5 and bad["gap"] > 0.5 and bad["loss_longer"] < bad["loss"]
    assert real["loss"] == pytest.approx(sequence_loss(*_ragged_logits(), PAD_ID)[0].item())


def _ragged_logits():
    src, tgt = broken.ragged_batch()
    return broken.tiny()(src, tgt[:, :-1]), tgt[:, 1:]


def test_heads_split_by_view_alone_leak_the_future_through_a_causal_layer():
    assert broken.mha_future_leak(broken.tiny_attention()) == 0.0
    assert broken.mha_future_leak(broken.tiny_attention(broken.HeadsWithoutTranspose)) > 0.05


def test_rope_without_the_cache_offset_changes_only_cached_decoding():
    real, bad = broken.tiny(pos_encoding="rope"), broken.tiny(broken.RopeCacheWithoutOffset)
    assert broken.cache_gap(real) < 1e-5 and broken.cache_gap(bad) > 0.1
    src, tgt = broken.cipher_batch(2, 8)
    assert torch.equal(real(src, tgt[:, :-1]), bad(src, tgt[:, :-1]))  # teacher forcing cannot see it


def test_decoding_without_eval_does_not_repeat():
    assert broken.repeat_gap(broken.decode_in_eval_mode) == 0.0
    assert broken.repeat_gap(broken.decode_without_eval) > 0.5
    assert broken.repeat_gap(broken.decode_without_eval, dropout=0.0) == 0.0  # no dropout, nothing to see


def test_the_chapter_is_what_sync_writes():
    path = REPO_ROOT / "book" / "11_broken.ipynb"
    assert notebook_in_sync(path), "run: python -m cipherbook.viva sync book/11_broken.ipynb"
