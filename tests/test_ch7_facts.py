"""The BLT chapter's measurements that live in ``cipherbook.experiments.blt``: each must tell a right
answer from a wrong one, or the chapter's asserts would prove nothing."""

import pytest
import torch

import cipherbook.experiments.blt as blt_facts
from cipherlab.base.config import Config
from cipherlab.models.blt import BLTArgs, BLTModel, patch_causal_mask, patch_membership
from cipherlab.data.tokenizers.bytes import BOS_ID, SPECIAL_IDS

PATCH = 3
TINY = dict(d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64, dropout=0.0, window=8,
            patch_tgt=PATCH, max_len=64, local_layers=Config.blt_local_layers,
            source_memory=Config.blt_source_memory, **SPECIAL_IDS)


@pytest.fixture
def tiny():
    """An untrained tiny BLT, one encoded source of 20 bytes in 4 patches, one decoder input of 14 bytes."""
    torch.manual_seed(0)
    model = BLTModel(BLTArgs(**TINY)).eval()
    src = torch.randint(0, 256, (1, 20))
    member = patch_membership([[0, 4, 9, 15]], [20], 20)
    with torch.no_grad():
        memory, memory_mask, source = model.encode_source(src, member)
    tgt = torch.cat([torch.full((1, 1), BOS_ID), torch.randint(0, 256, (1, 13))], dim=1)
    return model, tgt, memory, memory_mask, source


def test_measured_slot_dependencies_give_the_patch_causal_mask(tiny):
    model, tgt, memory, memory_mask, _ = tiny
    depends = blt_facts.slot_dependencies(model, tgt, memory, memory_mask)
    last = blt_facts.last_position_read(depends)
    K, Lt = depends.size(0), tgt.size(1)
    assert K == Lt // PATCH + 1
    assert last == [j * PATCH - 1 for j in range(K)]  # slot 0, the start patch, reads nothing: -1
    allowed = torch.tensor([[last[j] <= i for j in range(K)] for i in range(Lt)])
    assert torch.equal(allowed, ~patch_causal_mask(Lt, K, PATCH)[0, 0])


def test_decode_with_mask_is_decode_under_the_patch_causal_mask(tiny):
    model, tgt, memory, memory_mask, source = tiny
    with torch.no_grad():
        assert torch.equal(blt_facts.decode_with_mask(model, patch_causal_mask, tgt, memory, memory_mask, source),
                           model.decode(tgt, memory, memory_mask, source=source))


def test_leak_check_is_zero_for_safe_masks_and_fires_for_one_slot_more(tiny):
    model, tgt, memory, memory_mask, source = tiny

    def leak(mask_fn):
        return blt_facts.worst_leak(model, mask_fn, tgt, memory, memory_mask, source)

    assert leak(patch_causal_mask) == 0 and leak(blt_facts.strict_patch_mask) == 0
    assert leak(blt_facts.one_slot_more_mask) > 0


def test_swap_moves_attention_pooling_of_its_own_patch_but_not_the_mean():
    torch.manual_seed(0)
    model = BLTModel(BLTArgs(**{**TINY, "patch_tgt": 4})).eval()
    ids = torch.tensor([[BOS_ID, *b"Hello w"]])  # (1, 8): two patches of 4
    effect = blt_facts.pooling_swap_effect(model, ids, [0, 2, 1, 3, 4, 5, 6, 7])
    assert effect["attention, patch 1"] == 0
    assert effect["mean, patch 0"] < 1e-6 < effect["attention, patch 0"]
    assert effect["attention, same vectors reordered"] < 1e-6
