"""Tests for cipherlab.pipeline.decode: greedy and beam decoding, chunked decryption of whole lines."""

import pytest
import torch
from torch import nn

from cipherlab.data.cipher import KEY, DatasetError, encrypt
from cipherlab.pipeline.codec import SubwordCodec, teacher_forcing_logits
from cipherlab.pipeline.decode import beam_search, decode_batch, decrypt_lines, greedy_decode
from cipherlab.models import ModelArgs, Seq2SeqTransformer
from cipherlab.pipeline.train import sequence_loss

PAD, BOS, EOS = 0, 1, 2


class BitTokenizer:
    """'0' -> 3, '1' -> 4: the smallest tokenizer with the BPETokenizer interface."""

    pad_id, bos_id, eos_id, vocab_size = PAD, BOS, EOS, 5

    def encode(self, text):
        return [3 + int(ch) for ch in text]

    def decode(self, ids):
        return "".join(str(i - 3) for i in ids if i >= 3)


@pytest.fixture(scope="module")
def copy_model():
    """A tiny Seq2SeqTransformer trained until it copies 8-bit strings."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(ModelArgs(5, 5, d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64,
                                         dropout=0.0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        src = torch.randint(3, 5, (32, 8), generator=generator)
        tgt = torch.cat([torch.full((32, 1), BOS), src, torch.full((32, 1), EOS)], dim=1)
        loss, _ = sequence_loss(teacher_forcing_logits(model, {"src": src, "tgt": tgt}), tgt[:, 1:], PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def test_greedy_decoding_equals_the_argmax_of_teacher_forcing_once_the_copy_task_is_learned(copy_model):
    codec = SubwordCodec(BitTokenizer(), BitTokenizer())
    src = torch.randint(3, 5, (16, 8), generator=torch.Generator().manual_seed(1))
    tgt = torch.cat([torch.full((16, 1), BOS), src, torch.full((16, 1), EOS)], dim=1)
    with torch.no_grad():
        forced = teacher_forcing_logits(copy_model, {"src": src, "tgt": tgt}).argmax(-1)  # (B, 9)
    greedy = decode_batch(copy_model, codec, {"src": src}, max_len=9)
    assert forced.tolist() == tgt[:, 1:].tolist()  # the task is learned
    assert greedy == forced.tolist()


def test_beam_search_agrees_with_greedy_on_a_confident_model(copy_model):
    src = torch.tensor([[3, 4, 4, 3, 4, 3, 3, 4]])
    assert beam_search(copy_model, src, BOS, EOS, max_len=9, beam_size=3) == [[*src[0].tolist(), EOS]]


class ScriptedModel(nn.Module):
    """Next-token probabilities that depend only on the last token: greedy is misled, beam is not."""

    tgt_pad_id = PAD
    A, B, X = 3, 4, 5
    table = {
        BOS: {A: 0.6, B: 0.4},
        A: {X: 0.32, 6: 0.29, 7: 0.29, EOS: 0.1},
        B: {EOS: 0.9, X: 0.1},
        X: {EOS: 1.0},
        6: {EOS: 1.0},
        7: {EOS: 1.0},
    }

    def begin_decoding(self, src):
        return torch.zeros(src.size(0), 1, 1)  # nothing to encode; a state with one row per line

    def decode_prefix(self, state, prefixes):
        logits = torch.full((prefixes.size(0), prefixes.size(1), 8), -1e9)
        for row, last in enumerate(prefixes[:, -1].tolist()):
            for token, p in self.table.get(last, {EOS: 1.0}).items():
                logits[row, -1, token] = torch.tensor(p).log()
        return logits


def test_beam_search_finds_a_more_probable_output_than_greedy():
    m = ScriptedModel()
    # greedy: A (0.6) then X (0.32) then EOS: p = 0.19; beam: B (0.4) then EOS (0.9): p = 0.36
    src = torch.zeros(1, 1, dtype=torch.long)
    assert beam_search(m, src, BOS, EOS, max_len=5, beam_size=1, use_cache=False) == [[m.A, m.X, EOS]]
    assert beam_search(m, src, BOS, EOS, max_len=5, beam_size=2, use_cache=False) == [[m.B, EOS]]
    assert beam_search(m, src.expand(3, 1), BOS, EOS, max_len=5, beam_size=2, use_cache=False) == [[m.B, EOS]] * 3


def test_batched_beam_search_gives_each_line_what_it_gets_alone():
    # An untrained model whose EOS logit is always 0 (its output row zeroed): the lines stop at
    # different steps and the beams disagree with greedy decoding.
    torch.manual_seed(5)
    model = Seq2SeqTransformer(ModelArgs(5, 5, d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64,
                                         dropout=0.0)).eval()
    with torch.no_grad():
        model.tgt_embed.weight[EOS] = 0.0
    src = torch.randint(3, 5, (6, 8), generator=torch.Generator().manual_seed(2))
    src[2, 5:] = PAD  # a shorter line in the batch
    alone = [beam_search(model, src[i:i + 1, : 5 if i == 2 else 8], BOS, EOS, 10, beam_size=3)[0] for i in range(6)]
    assert beam_search(model, src, BOS, EOS, 10, beam_size=3) == alone
    assert len({len(a) for a in alone}) > 1  # lines of several lengths: lines leave the batch at different steps
    greedy = greedy_decode(model, src, BOS, EOS, 10).tolist()
    assert beam_search(model, src, BOS, EOS, 10, beam_size=1) == [g[: g.index(EOS) + 1] if EOS in g else g
                                                                 for g in greedy]
    assert alone != beam_search(model, src, BOS, EOS, 10, beam_size=1)  # the beams found other lines
    assert beam_search(model, src, BOS, EOS, 10, beam_size=3, use_cache=False) == alone


def test_a_limit_per_row_decodes_each_line_as_it_decodes_alone():
    # In a batch, a short chunk must not run on to the longest chunk's length: with a limit per row
    # (decrypt_chunks passes each chunk's characters + 1), greedy and beam search give every line
    # what it gets alone, whatever the batch.
    torch.manual_seed(5)
    model = Seq2SeqTransformer(ModelArgs(5, 5, d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64,
                                         dropout=0.0)).eval()
    with torch.no_grad():
        model.tgt_embed.weight[EOS] = -1.0  # EOS is rarely the argmax: most rows run to their limit
    lengths = [8, 3, 6, 1]
    src = torch.full((4, 8), PAD)
    for row, n in enumerate(lengths):
        src[row, :n] = torch.randint(3, 5, (n,), generator=torch.Generator().manual_seed(row))
    limits = [n + 1 for n in lengths]
    greedy = greedy_decode(model, src, BOS, EOS, limits).tolist()
    for row, n in enumerate(lengths):
        alone = greedy_decode(model, src[row:row + 1, :n], BOS, EOS, n + 1)[0].tolist()
        assert [t for t in greedy[row] if t != PAD] == alone and len(alone) <= n + 1
    assert max(len([t for t in g if t != PAD]) for g in greedy) == 9  # the longest row used its limit
    beams = beam_search(model, src, BOS, EOS, limits, beam_size=3)
    assert beams == [beam_search(model, src[row:row + 1, :n], BOS, EOS, n + 1, beam_size=3)[0]
                     for row, n in enumerate(lengths)]
    assert [len(b) for b in beams] != [len(b) for b in beam_search(model, src, BOS, EOS, 9, beam_size=3)]
    with pytest.raises(ValueError, match="max_len has 2 entries for 4 rows"):
        greedy_decode(model, src, BOS, EOS, [3, 4])


class OracleModel(nn.Module):
    """Decrypts each chunk exactly (phase restarts at every chunk), so any error is in the chunking."""

    tgt_pad_id = 256

    def begin_decoding(self, src):
        key = torch.tensor(list(KEY))[torch.arange(src.size(1)) % 8]
        plain = torch.where(src == self.tgt_pad_id, 258, src ^ key)  # EOS where the chunk ends
        return {"plain": torch.cat([plain, torch.full((src.size(0), 1), 258)], dim=1), "t": 0}

    def decode_step(self, state, tokens):
        logits = torch.full((tokens.size(0), 259), -1e9)
        logits[torch.arange(tokens.size(0)), state["plain"][:, state["t"]]] = 0.0
        state["t"] += 1
        return logits


class OracleCodec:
    """Bytes in, bytes out, as ByteCodec without entropy patches."""

    kind = "oracle"
    bos_id, eos_id, tgt_pad_id = 257, 258, 256

    def encode_source(self, bits):
        return [int(bits[i : i + 8], 2) for i in range(0, len(bits), 8)]

    def collate_sources(self, sources):
        src = torch.full((len(sources), max(map(len, sources))), self.tgt_pad_id)
        for row, s in enumerate(sources):
            src[row, : len(s)] = torch.tensor(s)
        return {"src": src}

    def model_source(self, batch):
        return {"src": batch["src"]}

    def decode_target(self, ids):
        return "".join(chr(i) for i in ids if i < 256)

    def token_chars(self):  # for the length constraint, greedy decoding's default
        return [1] * 256 + [0, 0, 0]


@pytest.mark.parametrize("chunk_chars", [8, 16, 64])
def test_long_lines_are_decoded_chunk_by_chunk_and_reassembled_in_order(chunk_chars):
    lines = ["The jury said it did find that many of the laws are outmoded.", "", "Hi", "x" * 100, "ab" * 37]
    predicted = decrypt_lines(
        OracleModel(), OracleCodec(), [encrypt(x) for x in lines], chunk_chars=chunk_chars,
        device=torch.device("cpu"), token_budget=40, max_batch_size=3,
    )
    assert predicted == lines


def test_decrypting_something_that_is_not_bits_names_the_line():
    with pytest.raises(DatasetError, match="input, line 2: character '2' at position 3 is not a bit"):
        decrypt_lines(OracleModel(), OracleCodec(), ["01010101", "0102"], chunk_chars=8, device=torch.device("cpu"))
    with pytest.raises(DatasetError, match="line 1: cipher length 7 is not a multiple of 8"):
        decrypt_lines(OracleModel(), OracleCodec(), ["0101010"], chunk_chars=8, device=torch.device("cpu"))


@pytest.mark.parametrize("source_memory", ["patches", "bytes"])
def test_beam_search_on_the_byte_latent_transformer_batched_and_alone(source_memory):
    from cipherlab.pipeline.codec import collate_source
    from cipherlab.models.blt import BLTArgs, BLTModel
    from cipherlab.models.blt_patching import ByteEntropyModel
    from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS

    torch.manual_seed(0)
    model = BLTModel(BLTArgs(d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64, dropout=0.0, window=8,
                             patch_tgt=4, max_len=64, local_layers=1, source_memory=source_memory,
                             **SPECIAL_IDS)).eval()
    sources = [list(range(40, 52)), list(range(60, 69))]  # two lengths: the second row is padded
    entropy = ByteEntropyModel(min_count=1).fit([bytes(s) for s in sources])
    src, member = collate_source(sources, entropy, entropy.threshold_at(75.0), 6)
    greedy = greedy_decode(model, src, BOS_ID, EOS_ID, 10, src_member=member).tolist()
    expected = [g[: g.index(EOS_ID) + 1] if EOS_ID in g else g for g in greedy]
    assert beam_search(model, src, BOS_ID, EOS_ID, 10, beam_size=1, src_member=member) == expected
    wide = beam_search(model, src, BOS_ID, EOS_ID, 10, beam_size=3, src_member=member)
    for row in range(2):  # each line alone, without the other's padding, gets the same beams
        real = src[row] != PAD_ID
        alone = beam_search(model, src[row:row + 1, real], BOS_ID, EOS_ID, 10, beam_size=3,
                            src_member=member[row:row + 1][:, member[row].any(-1)][:, :, real])
        assert alone == [wide[row]]


def test_length_constraint_forbids_an_early_eos_and_forces_eos_at_the_length():
    from cipherlab.pipeline.decode import LengthConstraint

    EOS_, BOS_ = 2, 1
    token_chars = [0, 0, 0, 1, 1, 2]  # pad, bos, eos, 'a', 'b', 'ab'
    hook = LengthConstraint(token_chars, [3, 2], EOS_, torch.device("cpu"))
    logits = torch.tensor([[0.0, 0.0, 9.0, 1.0, 0.0, 0.0]] * 2)  # both rows want to stop
    ys = torch.tensor([[BOS_, 5], [BOS_, 5]])  # 2 characters decoded in each row
    out = hook(logits, ys)
    assert out[0].argmax() == 3  # row 0: 2 < 3 characters, EOS forbidden -> next best
    assert out[1].argmax() == EOS_ and torch.isinf(out[1, 3])  # row 1: 2 characters reached, EOS forced
    assert logits[0, EOS_] == 9.0  # the caller's logits are not modified


@pytest.mark.parametrize("name", ["c1", "c5"])
def test_length_aware_decoding_returns_lines_of_the_cipher_length(name, sample_dir):
    from cipherlab.base.config import make_config
    from cipherlab.data.corpus import load_corpus
    from cipherlab.pipeline.codec import fit_codec, select_lines

    config = make_config(name, "smoke", source_mode="bytes", src_vocab=None, tgt_vocab=None)
    corpus = select_lines(load_corpus(sample_dir), config)
    codec = fit_codec(config, corpus)
    torch.manual_seed(0)
    model = codec.build_model(config).eval()  # untrained: it stops wherever it likes
    plain, cipher = corpus.lines("val")
    kwargs = dict(chunk_chars=config.chunk_chars, device=torch.device("cpu"))
    aware = decrypt_lines(model, codec, cipher, length_aware=True, **kwargs)
    assert [len(p) for p in aware] == [len(p) for p in plain]
    free = decrypt_lines(model, codec, cipher, length_aware=False, **kwargs)
    assert [len(p) for p in free] != [len(p) for p in plain]  # the constraint did something
    assert decrypt_lines(model, codec, cipher, **kwargs) == aware  # the default, as the command line's


def test_one_decoding_default_for_the_library_and_the_command_line():
    """Greedy decoding is length-aware unless asked otherwise (length_aware=False, --free); beam search,
    which the length constraint does not take, decodes freely: in decrypt_lines, evaluate_checkpoint and
    train/evaluate/decrypt alike."""
    import inspect
    from argparse import Namespace

    from cipherlab.cli.pipeline import _length_aware
    from cipherlab.pipeline.decode import decrypt_chunks, length_aware_by_default
    from cipherlab.runner.evaluate import decoding_name, evaluate_checkpoint

    for function in (decrypt_lines, decrypt_chunks, evaluate_checkpoint, decoding_name):
        assert inspect.signature(function).parameters["length_aware"].default is None, function.__name__
    for beam in (1, 4):
        assert _length_aware(Namespace(free=False, beam=beam)) == length_aware_by_default(beam) == (beam == 1)
        assert not _length_aware(Namespace(free=True, beam=beam))
    assert decoding_name() == "length-aware greedy" and decoding_name(1, False) == "free greedy"
    assert decoding_name(4) == "beam 4"


def test_length_constraint_forbids_a_subword_that_would_run_past_the_known_length():
    import torch

    from cipherlab.pipeline.decode import LengthConstraint

    # ids: 0 pad, 1 bos, 2 eos (no characters), 3 a one-character token, 4 a two-character token
    hook = LengthConstraint([0, 0, 0, 1, 2], target_chars=[3, 4], eos_id=2, device=torch.device("cpu"))
    ys = torch.tensor([[1, 4], [1, 4]])  # both rows have 2 characters so far
    logits = hook(torch.zeros(2, 5), ys)
    assert torch.isinf(logits[0, 4]) and torch.isfinite(logits[0, 3])  # 1 left: only a single character fits
    assert torch.isfinite(logits[1, 4]) and torch.isinf(logits[1, 2])  # 2 left: the pair fits, EOS not yet
