"""The codecs and the one model builder (the layers of the package: tests/test_layers.py)."""

from __future__ import annotations

import pytest

from cipherlab.pipeline.codec import build_model
from cipherlab.base.config import CONFIG_NAMES, make_config
from cipherlab.data.corpus import make_chunks
from cipherlab.models import Seq2SeqTransformer
from cipherlab.models.blt import BLTModel
from cipherlab.data.tokenizers.bytes import PAD_ID, VOCAB_SIZE


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_build_model_builds_each_configuration_from_its_config(name):
    config = make_config(name, "smoke", recipe="notes")  # free embedding rows: no codec needed
    model = build_model(config, vocab_sizes=(VOCAB_SIZE, VOCAB_SIZE), pad_id=PAD_ID)
    assert isinstance(model, BLTModel if config.tokenization == "blt" else Seq2SeqTransformer)
    if name == "c3":
        assert model.encoder.layers[0].self_attn.n_kv_heads == config.n_kv_heads


def test_build_model_without_a_codec_needs_the_vocabulary():
    with pytest.raises(ValueError, match="vocab_sizes"):
        build_model(make_config("c1", "smoke"))
    with pytest.raises(ValueError, match="bit_embeddings"):
        build_model(make_config("c1", "smoke", bit_embeddings=True), vocab_sizes=(VOCAB_SIZE, VOCAB_SIZE), pad_id=0)


def test_make_chunks_cuts_a_cipher_alone_as_it_cuts_a_pair():
    plain = ["", "abcdefghijklmnopq", "x" * 16]
    cipher = ["", "01" * 68, "10" * 64]
    paired = make_chunks(plain, cipher, range(3), 8)
    alone = make_chunks(None, cipher, range(3), 8)
    assert [(c.line, c.part, c.cipher) for c in alone] == [(c.line, c.part, c.cipher) for c in paired]
    assert all(c.plain == "" for c in alone)
