"""The facts registry: every number a viva answer or a chapter's prose quotes, computed, never typed.

``FACTS[chapter]`` maps a key to a zero-argument callable that returns an int, float or short
str computed by the chapter's experiments (``book/cipherbook/experiments/<chapter>.py``: a parameter
count of a real model, cache bytes from ``kv_cache_bytes``, a committed result, ...). The
chapter's cells call the same functions and print what they return, so the number in a sentence
is the one the cell above it shows.

An answer in ``book/cipherbook/viva/bank/<chapter>.yml`` cites a fact as ``{fact}`key``` or with a
format, ``{fact}`key:,d```; a chapter's prose quotes one as ``<span data-fact="key:,d">...</span>``.
``python -m cipherbook.viva sync`` writes the numbers in, and the book's tests fail when a notebook
and its facts disagree. Importing this module imports every chapter's experiments (torch and all):
``cipherbook.viva`` imports it only when facts are computed.

Keys say what the number is (``c2_exact_lines_over_c1_in_stderrs``). A lambda names the
experiments module it calls (``pos.wavelengths()``); a result several facts read is cached once
here (``_pos_permutation_checks``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from cipherbook import broken
from cipherlab.data.cipher import BITS_PER_CHAR, KEY, encrypt, key_phase
from cipherlab.base.config import CONFIG_NAMES, TOKENIZATIONS, make_config
from cipherlab.data.corpus import CHUNK_CHARS, load_corpus
from cipherbook.experiments import attention as att
from cipherbook.experiments import blt, bpe, common, mha
from cipherbook.experiments import broken as brk
from cipherbook.experiments import norm as nrm
from cipherbook.experiments import positional as pos
from cipherbook.experiments import results as res
from cipherbook.experiments import task as tsk
from cipherbook.experiments import training as trn
from cipherlab.pipeline.metrics import bit_matches, levenshtein
from cipherlab.models.attention import MultiHeadAttention
from cipherlab.models.norm import LayerNorm, RMSNorm
from cipherlab.models.positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from cipherlab.models.transformer import cross_kv_cache_bytes, kv_cache_bytes
from cipherbook.runs import BITS_RUN, EQUAL_EPOCHS_RUN, PRIMARY_RUN, reference
from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE

FACTS: dict[str, dict[str, Callable[[], object]]] = {}


# --------------------------------------------------------------------------- the task and the data: experiments/task.py

FACTS["task"] = {
    "task_key_len": lambda: len(KEY),
    "task_chunk_chars": lambda: CHUNK_CHARS,
    "task_cpu_chunk_chars": lambda: make_config("c1", "cpu").chunk_chars,
    "task_phases_256": lambda: tsk.start_phases_text(256),
    "task_phases_250": lambda: tsk.start_phases_text(250),
    "task_distinct_250": lambda: len(set(tsk.chunk_start_phases(250))),
    "task_distinct_253": lambda: len(set(tsk.chunk_start_phases(253))),
    "task_chunk1_phase_250": lambda: key_phase(250),
    "task_chunk1_bit_offset_250": lambda: 250 * BITS_PER_CHAR,
    "task_wrong_bits_e_for_a": lambda: tsk.wrong_bits("e", "a"),
    "task_wrong_bits_space_for_e": lambda: tsk.wrong_bits(" ", "e"),
    "task_worst_swap_codes": lambda: "{} and {}".format(*map(ord, tsk.worst_character_swap()[:2])),
    "task_worst_swap_bits": lambda: tsk.worst_character_swap()[2],
    "task_prefix_bits_right": lambda: bit_matches("H", encrypt("Hi"))[0],
    "task_prefix_bits_compared": lambda: bit_matches("H", encrypt("Hi"))[1],
}


# --------------------------------------------------------------------------- attention: experiments/attention.py

FACTS["attention"] = {
    "attn_var_over_d_512": lambda: att.scaling_experiment(512)["var_over_d"],
    "attn_max_weight_raw_512": lambda: att.scaling_experiment(512)["max_weight_raw"],
    "attn_max_weight_scaled_512": lambda: att.scaling_experiment(512)["max_weight_scaled"],
    "attn_head_dim": lambda: MultiHeadAttention(common.D_MODEL, common.N_HEADS).head_dim,
    "attn_cpu_head_dim": lambda: make_config("c1", "cpu").d_model // make_config("c1", "cpu").n_heads,  # trained runs
    "attn_pm1_pairs": lambda: att.sign_enumeration()["pairs"],
    "attn_pm1_var": lambda: int(att.sign_enumeration()["var"]),
    "attn_pm1_scaled_var": lambda: int(att.sign_enumeration()["scaled_var"]),
    "attn_padding_shape": lambda: att.shape_text(att.mask_shapes()["padding"]),
    "attn_causal_shape": lambda: att.shape_text(att.mask_shapes()["causal"]),
    "attn_both_shape": lambda: att.shape_text(att.mask_shapes()["both"]),
    "attn_neg_inf_row": lambda: str(att.blocked_row_policies()["neg_inf"].tolist()),
    "attn_dtype_min_row": lambda: str(att.blocked_row_policies()["dtype_min"].tolist()),
    "attn_blocked_output": lambda: str(att.blocked_row_policies()["cipherlab_output"].tolist()),
    "attn_shortest_line_chars": lambda: min(map(len, load_corpus().plain)),
    "attn_blocked_rows_c1": lambda: att.blocked_total("c1")[0],
    "attn_rows_c1": lambda: att.blocked_total("c1")[1],
    "attn_blocked_pool_frac_c5": lambda: (lambda b, n: b / n)(*att.blocked_rows_in_training("c5")["local_encoder.pooling.attn.attention"]),
    "attn_window_blind_batches": lambda: att.padded_window_batches()[0],
    "attn_window_batches": lambda: att.padded_window_batches()[1],
    "attn_cpu_blt_window": lambda: make_config("c5", "cpu").blt_window,
    "attn_cpu_chunk_chars": lambda: make_config("c5", "cpu").chunk_chars,
    "attn_longest_line_chars": att.longest_line,
    "attn_longest_line_bits": lambda: 8 * att.longest_line(),
    "attn_longest_line_scores_gb": lambda: (8 * att.longest_line()) ** 2 * 4 / 1e9,
    "attn_chunk_bits": lambda: 8 * CHUNK_CHARS,
    "attn_proj_flops_over_d2": lambda: att.flop_model()["proj_per_token"] // common.D_MODEL**2,
    "attn_pair_flops_over_d": lambda: att.flop_model()["pair"] // common.D_MODEL,
    "attn_ffn_flops_over_d2": lambda: att.flop_model()["ffn_per_token"] // common.D_MODEL**2,
    "attn_flop_crossover": lambda: int(att.flop_model()["crossover"]),
    "attn_fused_gap": att.fused_vs_scratch,
    "attn_leak_right_axis": lambda: att.softmax_axis_leak()["keys"],
    "attn_leak_wrong_axis": lambda: att.softmax_axis_leak()["queries"],
    "attn_wrong_axis_row_sum_min": lambda: att.softmax_axis_leak()["row_sum_min"],
    "attn_wrong_axis_row_sum_max": lambda: att.softmax_axis_leak()["row_sum_max"],
    "attn_reparam_output_gap": lambda: att.reparametrisation_gap()["output_gap"],
    "attn_reparam_weight_change": lambda: att.reparametrisation_gap()["weight_change"],
    "attn_reparam_rope_gap": lambda: att.reparametrisation_gap()["rope_gap"],
    "attn_reparam_across_heads_gap": lambda: att.reparametrisation_gap()["across_heads_gap"],
}


# --------------------------------------------------------------------------- multi-head and grouped-query attention, the KV cache: experiments/mha.py

FACTS["mha"] = {
    # the models as trained at the assignment preset (aligned BPE, results/assignment-cpu)
    "mha_acpu_c1_params": lambda: FACTS["results"]["res_acpu_c1_params"](),
    "mha_acpu_c3_params": lambda: FACTS["results"]["res_acpu_c3_params"](),
    "mha_acpu_saving_pct": lambda: 100 * (1 - res.assignment_cpu()[("c3", 0)]["params"]
                                          / res.assignment_cpu()[("c1", 0)]["params"]),
    # the (2, 4, 12), h = 3 trace
    "mha_trace_projected": lambda: str(mha.trace_shapes()["projected"]),
    "mha_trace_heads": lambda: str(mha.trace_shapes()["heads"]),
    "mha_trace_scores": lambda: str(mha.trace_shapes()["scores"]),
    "mha_trace_head_outputs": lambda: str(mha.trace_shapes()["head_outputs"]),
    "mha_trace_concatenated": lambda: str(mha.trace_shapes()["concatenated"]),
    "mha_trace_o_proj_weight": lambda: str(mha.trace_shapes()["o_proj_weight"]),
    "mha_trace_output": lambda: str(mha.trace_shapes()["output"]),
    # the multi-head attention chapter's trace: 5 queries read 7 keys, every axis a different size
    **{f"mha_xtrace_{stage}": (lambda stage=stage: str(mha.trace_shapes(length=5, key_length=7)[stage]))
       for stage in ("projected", "heads", "scores", "head_outputs", "concatenated", "output")},
    # parameter budgets from real modules
    "mha_params_d12": lambda: mha.projection_params(12, 3),
    "mha_params_d12_bias": lambda: mha.projection_params(12, 3, bias=True),
    "mha_params_d12_mqa": lambda: mha.projection_params(12, 3, n_kv_heads=1),
    "mha_params_d512": lambda: ", ".join(f"{n:,}" for n in sorted({mha.projection_params(512, h)
                                                                   for h in (1, 2, 8, 32, 128)})),
    "mha_params_d256_mha": lambda: mha.projection_params(256, 8, bias=True),
    "mha_params_d256_gqa": lambda: mha.projection_params(256, 8, n_kv_heads=2, bias=True),
    "mha_params_d256_mqa": lambda: mha.projection_params(256, 8, n_kv_heads=1, bias=True),
    "mha_o_proj_params": lambda: sum(p.numel() for p in MultiHeadAttention(256, 8).o_proj.parameters()),
    "mha_c1_params": lambda: mha.model("C1").num_params(),
    "mha_c3_params": lambda: mha.model("C3").num_params(),
    "mha_c1_c3_saving": lambda: mha.model("C1").num_params() - mha.model("C3").num_params(),
    "mha_c1_c3_saving_pct": lambda: 100 * (1 - mha.model("C3").num_params() / mha.model("C1").num_params()),
    # K/V head grouping
    "mha_repeat_kv_equal": lambda: str(mha.grouping_checks()["equal"]),
    "mha_tile_equal": lambda: str(mha.grouping_checks()["tile_equal"]),
    "mha_expand_is_view": lambda: str(mha.grouping_checks()["expand_is_view"]),
    # KV cache: drill sheet step 4 (80 layers, bf16) ...
    "mha_cache_mha_2048_gb": lambda: mha.big_cache(64, 2048) / 1e9,
    "mha_cache_mha_2048_gib": lambda: mha.big_cache(64, 2048) / 2**30,
    "mha_cache_mha_32768_gb": lambda: mha.big_cache(64, 32768) / 1e9,
    "mha_cache_mha_32768_gib": lambda: mha.big_cache(64, 32768) / 2**30,
    "mha_cache_ratio": lambda: mha.big_cache(64, 2048) // mha.big_cache(8, 2048),
    # ... and cipherlab's own C1 / C3 (float32, a batch of 64 targets of 256 tokens)
    "mha_c1_cache_mb": lambda: mha.megabytes(kv_cache_bytes(mha.model("C1"), 64, 256)),
    "mha_c3_cache_mb": lambda: mha.megabytes(kv_cache_bytes(mha.model("C3"), 64, 256)),
    "mha_cross_cache_mb": lambda: mha.megabytes(cross_kv_cache_bytes(mha.model("C1"), 64, 256)),
    "mha_c1_total_cache_mb": lambda: mha.megabytes(sum(mha.cache_by_module("C1").values())),
    "mha_c3_total_cache_mb": lambda: mha.megabytes(sum(mha.cache_by_module("C3").values())),
    "mha_total_cache_drop_pct": mha.total_cache_drop_pct,
    # C3 against C1 in the course notes' recipe runs: the controlled run (equal minutes), one seed each
    "mha_controlled_c3_minus_c1_exact_points": lambda: mha.c3_against_c1(PRIMARY_RUN)["exact"],
    "mha_controlled_c3_minus_c1_exact_stderr": lambda: mha.c3_against_c1(PRIMARY_RUN)["se"],
    "mha_c3_reading_ctrl": lambda: mha.c3_against_c1(PRIMARY_RUN)["reading"],
    # C3 against C1 in the reference ablation (results/reference): the default recipe, two seeds, paired
    "mha_ref_seeds": common.reference_seeds,
    "mha_ref_epochs": common.reference_epochs,
    "mha_ref_sets": common.reference_sets,
    "mha_ref_c3_lost": lambda: common.reference_against_c1("c3")["lost"],
    "mha_ref_c3_min_p": lambda: common.reference_against_c1("c3")["p"],
    "mha_ref_c3_saving_pct": lambda: 100 * (1 - common.reference_params("c3") / common.reference_params("c1")),
    "mha_ref_queries_per_kv": lambda: make_config("c3", "cpu").n_heads // make_config("c3", "cpu").n_kv_heads,
    # C3 against C1 without the key-phase embedding (results/nophase): Brown decoded length-aware, seed by seed
    "mha_nophase_tests": common.nophase_tests,
    "mha_nophase_bonferroni": common.nophase_bonferroni,
    "mha_nophase_brown_lines": lambda: common.nophase_lines("test"),
    "mha_nophase_c1_brown_exact": lambda: common.nophase_by_seed("c3", "test", "base_exact"),
    "mha_nophase_c3_brown_exact": lambda: common.nophase_by_seed("c3", "test", "exact"),
    "mha_nophase_c3_brown_p": lambda: common.nophase_by_seed("c3", "test", "p", ".2g"),
    "mha_nophase_c1_brown_free_exact": lambda: common.nophase_by_seed("c3", "test_free", "base_exact"),
    "mha_nophase_c3_brown_free_exact": lambda: common.nophase_by_seed("c3", "test_free", "exact"),
    "mha_nophase_c3_brown_free_p": lambda: common.nophase_by_seed("c3", "test_free", "p", ".2g"),
    "mha_notes_c1_bit": lambda: reference("seed", "c1", "bit_accuracy"),
    "mha_notes_c3_bit": lambda: reference("seed", "c3", "bit_accuracy"),
    "mha_test_lines": lambda: mha.c3_against_c1(PRIMARY_RUN)["lines"],
}


# --------------------------------------------------------------------------- positions: experiments/positional.py

_pos_permutation_checks = functools.cache(pos.permutation_checks)  # several facts read one run
_pos_phase_readout_preset = functools.cache(pos.phase_readout_preset)
_pos_bits_alignments = functools.cache(pos.bits_alignments)
_pos_cross_rope_checks = functools.cache(pos.cross_rope_checks)

FACTS["positional"] = {
    "pe_shortest_wavelength": lambda: pos.wavelengths()[0].item(),
    "pe_longest_wavelength": lambda: pos.wavelengths()[-1].item(),
    "pe_pair_below_key_period_dims": lambda: pos.pair_dims(pos.pairs_near_period()["below"][0]),
    "pe_pair_below_key_period_wavelength": lambda: pos.pairs_near_period()["below"][1],
    "pe_pair_above_key_period_dims": lambda: pos.pair_dims(pos.pairs_near_period()["above"][0]),
    "pe_pair_above_key_period_wavelength": lambda: pos.pairs_near_period()["above"][1],
    "pe_rms": lambda: common.sinusoidal_table().pow(2).mean().sqrt().item(),
    "emb_scaled_std": pos.scaled_embedding_std,
    "emb_scaled_std_recipe": lambda: pos.recipe_embedding_std()["tokens"],
    "phase_scaled_std_recipe": lambda: pos.recipe_embedding_std()["phase"],
    "pe_buffer_bytes": lambda: f"{pos.nonpersistent_buffer_bytes(SinusoidalPositionalEncoding(common.D_MODEL, common.MAX_LEN)):,}",
    "rope_offset_err": pos.rope_offset_error,
    "cross_attn_memory_shuffle_max_diff": lambda: _pos_permutation_checks()["cross_shuffle"],
    "rope_halfsplit_vs_interleaved_max_diff": pos.halfsplit_vs_interleaved_error,
    "self_attn_permutation_max_diff": lambda: _pos_permutation_checks()["equivariance"],
    "causal_self_attn_permutation_max_diff": lambda: _pos_permutation_checks()["causal"],
    "learned_pe_params": lambda: f"{pos.count_parameters(LearnedPositionalEncoding(common.D_MODEL, common.MAX_LEN)):,}",
    "preset_positions": pos.preset_positions,
    "preset_last_position": lambda: pos.preset_positions() - 1,
    "phase_readout_table_beyond_share": lambda: _pos_phase_readout_preset()["table, float64"]["beyond"],
    "phase_readout_gaussian_beyond_share": lambda: _pos_phase_readout_preset()["Gaussian, same width"]["beyond"],
    "pair_first_misread": pos.first_misread,
    "asg_head_dim": pos.assignment_head_dim,
    "asg_rope_wavelength_below_period": lambda: pos.pairs_near_period(common.KEY_PERIOD, pos.assignment_head_dim())["below"][1],
    "asg_rope_wavelength_above_period": lambda: pos.pairs_near_period(common.KEY_PERIOD, pos.assignment_head_dim())["above"][1],
    "phase_chance": lambda: 1 / common.KEY_PERIOD,
    "rope_long_pairs_preset": lambda: pos.long_pairs(pos.preset_chunk_chars()),
    "cpu_head_dim": pos.cpu_head_dim,
    "cpu_rope_n_pairs": lambda: pos.cpu_head_dim() // 2,
    "cpu_rope_long_pairs_preset": lambda: pos.long_pairs(pos.preset_chunk_chars(), pos.cpu_head_dim()),
    "bits_src_over_tgt_tokens_assignment": lambda: _pos_bits_alignments()["notes shape"]["ratio"],
    "bits_src_over_tgt_tokens_cpu": lambda: _pos_bits_alignments()["cpu-bits shape"]["ratio"],
    "bits_c1_cer": lambda: common.percent(common.BITS, "c1", "char_error_rate"),
    "bits_c2_cer": lambda: common.percent(common.BITS, "c2", "char_error_rate"),
    "rope_head_dim": lambda: pos.HEAD_DIM,
    "rope_n_pairs": lambda: pos.HEAD_DIM // 2,
    "rope_long_pairs": lambda: int((pos.wavelengths(pos.HEAD_DIM) > CHUNK_CHARS).sum()),
    "chunk_chars": lambda: CHUNK_CHARS,
    "preset_chunk_chars": pos.preset_chunk_chars,
    "cross_rope_offset_only_max_err": lambda: _pos_cross_rope_checks()["diagonal_err"],
    "cross_no_rope_score_spread": lambda: _pos_cross_rope_checks()["flat_spread"],
    "calibration_b_first_epoch_val_loss": lambda: common.first_epoch_loss("B"),
    "calibration_c_first_epoch_val_loss": lambda: common.first_epoch_loss("C"),
    "calibration_e_first_epoch_val_loss": lambda: common.first_epoch_loss("E"),
    "calibration_c_val_bit_accuracy": lambda: common.calibration_bits("C"),
    "calibration_e_val_bit_accuracy": lambda: common.calibration_bits("E"),
    "calibration_b_val_bit_accuracy": lambda: common.calibration_bits("B"),
    "calibration_b_scored_step": lambda: common.scored_step(common.calibration_run("B")),
    "calibration_e_scored_step": lambda: common.scored_step(common.calibration_run("E")),
    "calibration_c_src_vocab": lambda: common.calibration_run("C")["overrides"]["src_vocab"],
    "calibration_c_tgt_vocab": lambda: common.calibration_run("C")["overrides"]["tgt_vocab"],
    "bits_run_c2_rope_in_cross_attention": lambda: pos.cross_rotation(common.BITS),
    "bits_src_vocab": lambda: common.run_records(common.BITS)["c2"]["hyperparameters"]["src_vocab"],
    "bits_lines": lambda: common.test_lines(common.BITS),
    "bits_exact_lines": lambda: pos.shared_value(f"{common.BITS} exact lines", {c: common.exact_lines(common.BITS, c) for c in ("c1", "c2")}),
    "bits_c1_bit": lambda: common.percent(common.BITS, "c1", "bit_accuracy"),
    "bits_c2_bit": lambda: common.percent(common.BITS, "c2", "bit_accuracy"),
    # C2 against C1 in the reference ablation (results/reference): the default recipe, two seeds, paired
    "ref_seeds": common.reference_seeds,
    "ref_sets": common.reference_sets,
    "ref_epochs": common.reference_epochs,
    "ref_c2_min_p_set": lambda: common.reference_against_c1("c2")["set"],
    "ref_c2_low_set_p_by_seed": lambda: common.seed_by_seed(pos.reference_lowest_set_p("c2"), ".2g"),
    "ref_lines_per_seed": lambda: pos.shared_value("reference lines per seed", {
        seed: t["lines"] for seed, t in pos.reference_totals("c2").items()}),
    "ref_c1_exact_by_seed": lambda: common.seed_by_seed([t["base_exact"] for t in pos.reference_totals("c2").values()]),
    "ref_c2_exact_by_seed": lambda: common.seed_by_seed([t["exact"] for t in pos.reference_totals("c2").values()]),
    "ref_tests": lambda: len(common.reference_paired()),
    "ref_bonferroni": lambda: 0.05 / len(common.reference_paired()),
    # C2 against C1 without the key-phase embedding (results/nophase): the same ablation, the shuffle still on
    "nophase_tests": common.nophase_tests,
    "nophase_bonferroni": common.nophase_bonferroni,
    "nophase_alphabet_lines": lambda: common.nophase_lines("random_alphabet"),
    "nophase_c1_alphabet_exact": lambda: common.nophase_by_seed("c2", "random_alphabet", "base_exact"),
    "nophase_c2_alphabet_exact": lambda: common.nophase_by_seed("c2", "random_alphabet", "exact"),
    "nophase_c2_alphabet_p": lambda: common.nophase_by_seed("c2", "random_alphabet", "p", ".2g"),
    # C2 against C1 with the aligned BPE (results/aligned): merged tokens, the period handed in
    "aligned_alphabet_lines": lambda: common.aligned_lines("c2", "random_alphabet"),
    "aligned_c1_alphabet_exact": lambda: common.aligned_by_seed("c2", "random_alphabet", "base_exact"),
    "aligned_c2_alphabet_exact": lambda: common.aligned_by_seed("c2", "random_alphabet", "exact"),
    "aligned_c2_alphabet_p": lambda: common.aligned_by_seed("c2", "random_alphabet", "p", ".2g"),
    "aligned_tests": lambda: len(common.aligned_paired()),
    "aligned_bonferroni": common.aligned_bonferroni,
}


# --------------------------------------------------------------------------- normalisation: experiments/norm.py

_nrm_depth_profile = functools.cache(nrm.depth_profile)  # many facts read the same three runs
_nrm_bf16_errors = functools.cache(nrm.bf16_statistics_errors)
_nrm_first_norm_inputs = functools.cache(nrm.first_norm_inputs)

FACTS["norm"] = {
    "norm_aligned_c1_alphabet": lambda: common.aligned_by_seed("c4", "random_alphabet", "base_exact"),
    "norm_aligned_c4_alphabet": lambda: common.aligned_by_seed("c4", "random_alphabet", "exact"),
    "norm_aligned_c4_alphabet_p": lambda: common.aligned_by_seed("c4", "random_alphabet", "p", ".2g"),
    "norm_aligned_alphabet_lines": lambda: common.aligned_lines("c4", "random_alphabet"),
    "norm_aligned_bonferroni": common.aligned_bonferroni,
    "ln_params": lambda: sum(p.numel() for p in LayerNorm(common.D_MODEL).parameters()),
    "rms_params": lambda: sum(p.numel() for p in RMSNorm(common.D_MODEL).parameters()),
    "bf16_smallest_normal": lambda: f"{torch.finfo(torch.bfloat16).smallest_normal:.2e}",
    "bf16_eps": lambda: f"2^{round(math.log2(torch.finfo(torch.bfloat16).eps))} = {torch.finfo(torch.bfloat16).eps}",
    "bf16_demo_offset": lambda: 30,
    "ln_mean_err_bf16_statistics": lambda: _nrm_bf16_errors()["bf16"],
    "ln_mean_err_fp32_statistics": lambda: _nrm_bf16_errors()["fp32"],
    "bf16_naive_var_min": lambda: _nrm_bf16_errors()["naive_var_min"],
    "grad_depth": lambda: nrm.DEPTH,
    "pre_resid_rms_top": lambda: _nrm_depth_profile("pre")["rms"][-1],
    "final_norm_rms": lambda: _nrm_depth_profile("pre")["final_rms"],
    "pre_top_over_bottom_grad": lambda: _nrm_depth_profile("pre")["grad"][-1] / _nrm_depth_profile("pre")["grad"][0],
    "post_over_pre_top_grad": lambda: _nrm_depth_profile("post")["grad"][-1] / _nrm_depth_profile("pre")["grad"][-1],
    "n_norm_layers": lambda: nrm.count_norm_layers(nrm.ablation_model("layernorm")),
    "c4_params_saved": lambda: f"{nrm.c4_parameters_saved():,}",
    "c4_train_bytes_saved": lambda: f"{nrm.c4_parameters_saved() * 4 * 4:,}",  # fp32 weight, grad, Adam m and v
    "pe_pos0_mean_ratio": lambda: nrm.mean_over_rms(common.sinusoidal_table(common.D_MODEL, 1)).item(),
    "init_mean_ratio_median": lambda: nrm.mean_over_rms(_nrm_first_norm_inputs()).median().item(),
    "ln_rms_diff_median": lambda: nrm.layernorm_vs_rmsnorm(_nrm_first_norm_inputs()).median().item(),
    "pre_bottom_grad": lambda: _nrm_depth_profile("pre")["grad"][0],
    "pre_bottom_over_top_stream_grad": lambda: _nrm_depth_profile("pre")["stream_grad"][0] / _nrm_depth_profile("pre")["stream_grad"][-1],
    "noresid_bottom_grad": lambda: _nrm_depth_profile("no-residual")["grad"][0],
    "noresid_over_pre_bottom_grad": lambda: _nrm_depth_profile("no-residual")["grad"][0] / _nrm_depth_profile("pre")["grad"][0],
    "noresid_bottom_over_top_grad": lambda: _nrm_depth_profile("no-residual")["grad"][0] / _nrm_depth_profile("no-residual")["grad"][-1],
    "input_spread": lambda: _nrm_depth_profile("pre")["input_spread"],
    "pre_spread": lambda: _nrm_depth_profile("pre")["spread"],
    "post_spread": lambda: _nrm_depth_profile("post")["spread"],
    "noresid_spread": lambda: _nrm_depth_profile("no-residual")["spread"],
    # C4 against C1 in the course notes' recipe runs at equal epochs, one seed each
    "eq_epochs_c4_minus_c1_exact_points": lambda: nrm.c4_against_c1(EQUAL_EPOCHS_RUN)["exact"],
    "eq_epochs_c4_minus_c1_exact_stderr": lambda: nrm.c4_against_c1(EQUAL_EPOCHS_RUN)["se"],
    "eq_epochs_c4_vs_c1_reading": lambda: nrm.c4_against_c1(EQUAL_EPOCHS_RUN)["reading"],
    # C4 against C1 in the reference ablation (results/reference): the default recipe, two seeds, paired
    "ref_seeds": common.reference_seeds,
    "ref_sets": common.reference_sets,
    "ref_epochs": common.reference_epochs,
    "ref_c4_lost": lambda: common.reference_against_c1("c4")["lost"],
    "ref_c4_min_p": lambda: common.reference_against_c1("c4")["p"],
    # C4 against C1 without the key-phase embedding (results/nophase): its lowest p-value and the other seed's
    "nophase_c4_low_p": lambda: common.nophase_lowest("c4")["p"],
    "nophase_c4_low_c1_exact": lambda: common.nophase_lowest("c4")["base_exact"],
    "nophase_c4_low_exact": lambda: common.nophase_lowest("c4")["exact"],
    "nophase_c4_low_lines": lambda: common.nophase_lowest("c4")["lines"],
    "nophase_c4_low_other_p": lambda: common.nophase_lowest("c4")["other"]["p"],
    # what the course notes report of their own C1 and C4 runs (cipherbook.runs)
    "notes_c1_bit": lambda: reference("seed", "c1", "bit_accuracy"),
    "notes_c4_bit": lambda: reference("seed", "c4", "bit_accuracy"),
    "notes_c1_peak_gb": lambda: reference("seed", "c1", "peak_memory_gb"),
    "notes_c4_peak_gb": lambda: reference("seed", "c4", "peak_memory_gb"),
    "notes_peak_gap_mb": lambda: 1000 * (reference("seed", "c1", "peak_memory_gb")
                                         - reference("seed", "c4", "peak_memory_gb")),
}


# --------------------------------------------------------------------------- tokenisation: experiments/bpe.py

FACTS["bpe"] = {
    "drill_first_merge": lambda: " + ".join(repr(s) for s in bpe.drill_trace()[0][0]),
    "drill_first_count": lambda: bpe.drill_trace()[0][1],
    "drill_n_words": lambda: sum(bpe.drill_segmented().values()),
    "prose_tokens_per_word": lambda: bpe.byte_drill_table()["prose"]["tokens_per_word"],
    "identifier_tokens_per_word": lambda: bpe.byte_drill_table()["identifier"]["tokens_per_word"],
    "nonlatin_tokens_per_word": lambda: bpe.byte_drill_table()["non-Latin"]["tokens_per_word"],
    "telugu_chars": lambda: bpe.byte_drill_table()["non-Latin"]["chars"],
    "telugu_bytes": lambda: bpe.byte_drill_table()["non-Latin"]["bytes"],
    "telugu_tokens": lambda: bpe.byte_drill_table()["non-Latin"]["tokens"],
    "src_vocab": lambda: common.SRC_VOCAB,
    "src_merges_bits": lambda: bpe.cipher_mode_stats("bits")["merges"],
    "bits_per_token_bits": lambda: bpe.cipher_mode_stats("bits")["bits_per_token"],
    "bits_per_token_bytes": lambda: bpe.cipher_mode_stats("bytes")["bits_per_token"],
    "straddle_bits": lambda: bpe.cipher_mode_stats("bits")["straddle"],
    "straddle_bytes": lambda: bpe.cipher_mode_stats("bytes")["straddle"],
    "small_cipher_lines": lambda: bpe.SMALL_CIPHER_LINES,
    "src_embed_params": lambda: f"{common.baseline_model().src_embed.weight.numel():,}",
    "tgt_embed_params": lambda: f"{common.baseline_model().tgt_embed.weight.numel():,}",
    "cross_word_share_plain": lambda: bpe.cross_word_share("plaintext"),
    "cross_word_share_whole_line": lambda: bpe.cross_word_share("cipher"),
    "bpe_bench_summary": bpe.benchmark_summary,
    "mode_bits_src_vocab": lambda: common.run_records(common.BITS)["c1"]["hyperparameters"]["src_vocab"],
    "mode_lines": lambda: common.run_records(bpe.BYTES)["c1"]["sets"]["test"]["lines"],
    "mode_bytes_exact": lambda: common.percent(bpe.BYTES, "c1", "sequence_accuracy"),
    "mode_bits_exact": lambda: common.percent(common.BITS, "c1", "sequence_accuracy"),
    "mode_exact_se": lambda: math.hypot(common.exact_stderr(bpe.BYTES, "c1"), common.exact_stderr(common.BITS, "c1")),
    "mode_bytes_epochs": lambda: common.run_records(bpe.BYTES)["c1"]["epochs"],
    "mode_bits_epochs": lambda: common.run_records(common.BITS)["c1"]["epochs"],
    "mode_bytes_bit": lambda: common.percent(bpe.BYTES, "c1", "bit_accuracy"),
    "mode_bits_bit": lambda: common.percent(common.BITS, "c1", "bit_accuracy"),
    "bits_over_whole_bytes": bpe.bits_over_whole_bytes,
    "mode_bytes_bit_min": lambda: min(r["bytes_bit"] for r in bpe.mode_table().values()),
    "mode_bytes_bit_max": lambda: max(r["bytes_bit"] for r in bpe.mode_table().values()),
    "mode_bits_bit_min": lambda: min(r["bits_bit"] for r in bpe.mode_table().values()),
    "mode_bits_bit_max": lambda: max(r["bits_bit"] for r in bpe.mode_table().values()),
    "wordpiece_disagree_share": lambda: bpe.segmentation_disagreements()[0] / bpe.segmentation_disagreements()[1],
    "straddle_bits_notes": bpe.notes_bits_straddle,
    "aligned_src_merges": lambda: bpe.aligned_runs()[("c1", 0)]["tokens"]["source_merges"],
    "merges_lines_brown_max": lambda: max(e for e, _ in bpe.brown_exact_by_merges_on()["lines"]),
    "merges_chunks_brown_min": lambda: min(e for e, n in bpe.brown_exact_by_merges_on()["chunks"] if n == 200),
    "merges_brown_lines": lambda: bpe.merges_exact("m-phase2560-chunks", "test")[1],
    "dropout_off_random": lambda: bpe.dropout_random()["off"],
    "dropout_on_random": lambda: bpe.dropout_random()["on"],
    "dropout_random_lines": lambda: bpe.dropout_random()["lines"],
    "dropout_only_on": lambda: bpe.dropout_random()["only_on"],
    "dropout_only_off": lambda: bpe.dropout_random()["only_off"],
    "dropout_p": lambda: bpe.dropout_random()["p"],
    "merges_random_lines": lambda: bpe.merges_exact("m-phase2560-chunks")[1],
    "merges_aligned_random": lambda: bpe.merges_exact("m-phase2560-chunks")[0],
    "merges_chars_random": lambda: bpe.merges_exact("m-phase2560-chunks-chars")[0],
    "merges_3072_random": lambda: bpe.merges_exact("m-phase3072-chunks")[0],
    "merges_aligned_brown": lambda: bpe.merges_exact("m-phase2560-chunks", "test")[0],
    "merges_chars_brown": lambda: bpe.merges_exact("m-phase2560-chunks-chars", "test")[0],
    "merges_small_src_vocab": lambda: bpe.merges_runs()["m-phase2560-chunks"]["hyperparameters"]["src_vocab"],
    "merges_large_src_vocab": lambda: bpe.merges_runs()["m-phase3072-chunks"]["hyperparameters"]["src_vocab"],
    "aligned_c1s1_brown_lost": lambda: bpe.aligned_brown_cost()[("c1", 1)]["only_reference"],
    "aligned_c1s1_brown_p": lambda: bpe.aligned_brown_cost()[("c1", 1)]["p"],
    "aligned_c4s1_brown_lost": lambda: bpe.aligned_brown_cost()[("c4", 1)]["only_reference"],
    "aligned_c4s1_brown_p": lambda: bpe.aligned_brown_cost()[("c4", 1)]["p"],
    "aligned_brown_lines": lambda: bpe.aligned_brown_cost()[("c1", 1)]["lines"],
    "nomerge_random": lambda: bpe.dropout_random()["no_merges"],
    "aligned_bpe_dropout": lambda: TOKENIZATIONS["aligned"]["bpe_dropout"],
    "heldout_lines": lambda: bpe.EVAL_LINES,
    "heldout_tokens_per_word": lambda: bpe.byte_drill_heldout()["tokens_per_word"],
    "merges_aligned_chars_brown_p": lambda: bpe.merges_paired("m-phase2560-chunks", "m-phase2560-chunks-chars", "test")[2],
    "merges_aligned_chars_random_p": lambda: bpe.merges_paired("m-phase2560-chunks", "m-phase2560-chunks-chars")[2],
    "merges_3072_2560_random_p": lambda: bpe.merges_paired("m-phase3072-chunks", "m-phase2560-chunks")[2],
    "merges_last_random_lines": lambda: bpe.merges_exact("m-phase3072-chunks-tokenphase")[1],
    "merges_last_brown_lines": lambda: bpe.merges_exact("m-phase3072-chunks-tokenphase", "test")[1],
    "aligned_c1s1_brown_gained": lambda: bpe.aligned_brown_cost()[("c1", 1)]["only_aligned"],
    "aligned_c4s1_brown_gained": lambda: bpe.aligned_brown_cost()[("c4", 1)]["only_aligned"],
}


# --------------------------------------------------------------------------- the Byte Latent Transformer: experiments/blt.py

FACTS["blt"] = {
    "byte_vocab": lambda: VOCAB_SIZE,
    "byte_pad_id": lambda: PAD_ID,
    "byte_bos_id": lambda: BOS_ID,
    "byte_eos_id": lambda: EOS_ID,
    "chunk_chars": lambda: CHUNK_CHARS,
    "chunk_bits": lambda: 8 * CHUNK_CHARS,
    "straddle_bits_full": lambda: blt.benchmark("bpe")["sides"]["source_bits"]["boundary_straddle_rate_val"],
    "chunk_src_bytes": lambda: blt.chunk_patch_stats()["source_bytes"],
    "chunk_src_patches": lambda: blt.chunk_patch_stats()["source_patches"],
    "chunk_src_bpe": lambda: blt.per_chunk("bpe")["source_tokens"],
    "chunk_tgt_bytes": lambda: blt.chunk_patch_stats()["target_bytes_with_bos"],
    "chunk_tgt_slots": lambda: blt.chunk_patch_stats()["target_global_slots"],
    "chunk_tgt_bpe": lambda: blt.per_chunk("bpe")["target_tokens"],
    "c1_params": lambda: f"{blt.benchmark('blt')['training_step']['params']['c1']:,}",
    "c5_params": lambda: f"{blt.benchmark('blt')['training_step']['params']['c5']:,}",
    "percentile": lambda: blt.SETTINGS.blt_entropy_percentile,
    "threshold_bits": blt.threshold,
    "threshold_bits_cpu": lambda: blt.threshold_at_preset("cpu"),
    "train_lines_cpu": lambda: f"{make_config('c5', 'cpu').max_train_lines:,}",
    "max_entropy": lambda: float(blt.entropy_model().train_entropies.max()),
    "unigram_entropy": lambda: blt.entropy_model().unigram_entropy,
    "max_entropy_context": blt.max_entropy_with_context,
    "start_after_space": lambda: blt.boundary_share_by_previous_char()["space"],
    "start_after_letter": lambda: blt.boundary_share_by_previous_char()["letter or digit"],
    "english_chunk_mean_patch": lambda: blt.recipe_chunk_patch_stats()["English"]["mean_patch"],
    "shuffled_chunk_mean_patch": lambda: blt.recipe_chunk_patch_stats()["recipe-shuffled"]["mean_patch"],
    "english_chunk_after_letter": lambda: blt.recipe_chunk_patch_stats()["English"]["after_letter"],
    "shuffled_chunk_after_letter": lambda: blt.recipe_chunk_patch_stats()["recipe-shuffled"]["after_letter"],
    "absolute_cutoff": lambda: blt.ABSOLUTE_CUTOFF,
    "max_patch": lambda: blt.SETTINGS.blt_max_patch,
    "patch_tgt": lambda: blt.SETTINGS.blt_patch_tgt,
    "window": lambda: blt.SETTINGS.blt_window,
    "mean_patch": lambda: blt.patch_stats(blt.threshold(), blt.SETTINGS.blt_max_patch)["mean"],
    "share_capped": lambda: blt.patch_stats(blt.threshold(), blt.SETTINGS.blt_max_patch)["share_at_cap"],
    "cutoff_entropy_starts": lambda: blt.patch_stats(blt.ABSOLUTE_CUTOFF, blt.SETTINGS.blt_max_patch)["entropy_starts"],
    "cutoff_share_capped": lambda: blt.patch_stats(blt.ABSOLUTE_CUTOFF, blt.SETTINGS.blt_max_patch)["share_at_cap"],
    "longest_uncapped": lambda: blt.patch_stats(blt.threshold(), 10**9)["longest"],
    "cutoff_longest_uncapped": lambda: blt.patch_stats(blt.ABSOLUTE_CUTOFF, 10**9)["longest"],
    "longest_line": blt.longest_line,
    "scores_full_mib": lambda: blt.mib(blt.windowed_vs_full()["full_bytes"]),
    "scores_windowed_mib": lambda: blt.mib(blt.windowed_vs_full()["windowed_bytes"]),
    "scores_ratio": lambda: blt.windowed_vs_full()["full_bytes"] / blt.windowed_vs_full()["windowed_bytes"],
    "window_max_diff": lambda: blt.windowed_vs_full()["max_diff"],
    "source_memory_default": lambda: blt.SETTINGS.blt_source_memory,
    "calibration_val_lines": common.calibration_lines,
    "calibration_patches_val_bit_accuracy": lambda: common.calibration_bits("D"),
    "calibration_bytes_val_bit_accuracy": lambda: common.calibration_bits("F"),
    "calibration_patches_scored_step": lambda: common.scored_step(common.calibration_run("D")),
    "calibration_bytes_scored_step": lambda: common.scored_step(common.calibration_run("F")),
    # at the cpu preset: the reference ablation's models (the default recipe), as its records count them
    "c1_params_cpu": lambda: f"{common.reference_params('c1'):,}",
    "c5_params_cpu": lambda: f"{common.reference_params('c5'):,}",
    "c5_over_c1_cpu": lambda: common.reference_params("c5") / common.reference_params("c1"),
    # at the assignment's sizes with the course notes' BPEs (blt.counted_recipe), the benchmark's counts
    "c5_over_c1_assignment": lambda: blt.c5_model("assignment").num_params() / blt.c1_params("assignment"),
    # the assignment preset itself (the aligned BPE), as its committed records count it (results/assignment-cpu)
    "c1_params_assignment": lambda: f"{res.assignment_cpu()[('c1', 0)]['params']:,}",
    "c5_params_assignment": lambda: f"{res.assignment_cpu()[('c5', 0)]['params']:,}",
    "c5_over_c1_assignment_preset": lambda: res.assignment_cpu()[("c5", 0)]["params"] / res.assignment_cpu()[("c1", 0)]["params"],
    # the assignment's C1 (aligned BPE): characters per source token on the Brown test lines (results/assignment-cpu)
    "aligned_chars_per_token": lambda: res.assignment_cpu()[("c1", 0)]["tokens"]["chars_per_source_token"],
    "window_cpu": lambda: make_config("c5", "cpu").blt_window,
    "chunk_chars_cpu": lambda: make_config("c5", "cpu").chunk_chars,
    "chunk_chars_assignment": lambda: blt.SETTINGS.chunk_chars,
}


# --------------------------------------------------------------------------- assembling and training the model: experiments/training.py

_trn_init_scales = functools.cache(trn.init_scales)
_trn_spike = functools.cache(trn.adam_spike)
_trn_byte_waste = functools.cache(lambda: trn.waste(trn.training_byte_lengths()))
_trn_adam = functools.cache(trn.adam_first_step)
_trn_decode_cache = functools.cache(lambda: trn.decode_cache_mb(trn.decode_batch_sizes()["rows"],
                                                                 *2 * [trn.decode_batch_sizes()["positions"]]))

FACTS["training"] = {
    "d_model": lambda: trn.NOTES_SIZES.d_model,
    "tgt_vocab": lambda: f"{trn.NOTES_SIZES.tgt_vocab:,}",
    "tie_saved": lambda: f"{trn.tying_saves():,}",
    "c1_params": lambda: f"{trn.assignment_model().num_params():,}",
    "tie_share_untied": lambda: trn.tying_saves() / (trn.assignment_model().num_params() + trn.tying_saves()),
    "preset_c1_params": lambda: f"{trn.preset_model().num_params():,}",
    "preset_tgt_vocab": lambda: trn.preset_codec().tgt.vocab_size,
    "ln_vocab_preset": lambda: math.log(trn.preset_codec().tgt.vocab_size),
    "n_heads": lambda: trn.NOTES_SIZES.n_heads,
    "n_kv_heads": lambda: trn.NOTES_SIZES.n_kv_heads,
    "sqrt_d": lambda: math.sqrt(trn.NOTES_SIZES.d_model),
    "embed_over_pe_default_init": lambda: _trn_init_scales(1.0)["embed_over_pe"],
    "embed_over_pe_scaled_init": lambda: _trn_init_scales(trn.NOTES_SIZES.d_model ** -0.5)["embed_over_pe"],
    "logit_std_default_init": lambda: _trn_init_scales(1.0)["logit_std"],
    "logit_std_scaled_init": lambda: _trn_init_scales(trn.NOTES_SIZES.d_model ** -0.5)["logit_std"],
    "initial_loss_default_init": lambda: _trn_init_scales(1.0)["loss"],
    "initial_loss_scaled_init": lambda: _trn_init_scales(trn.NOTES_SIZES.d_model ** -0.5)["loss"],
    "ln_vocab": lambda: math.log(trn.NOTES_SIZES.tgt_vocab),
    "smoothing": lambda: trn.SMOOTHING,
    "confident_margin": lambda: trn.CONFIDENT_MARGIN,
    "confident_loss_no_smoothing": lambda: f"{trn.confident_loss(trn.CONFIDENT_MARGIN, 0.0):.1e}",
    "confident_loss_with_smoothing": lambda: trn.confident_loss(trn.CONFIDENT_MARGIN, trn.SMOOTHING),
    "best_margin": lambda: trn.best_margin(),
    "best_margin_loss": lambda: trn.confident_loss(trn.best_margin(), trn.SMOOTHING),
    "warmup_steps": lambda: trn.NOTES_SIZES.warmup_steps,
    "peak_lr": lambda: f"{trn.NOTES_SIZES.lr:g}",
    "lr_factor_at_4x_warmup": lambda: trn.lr_factor(4 * trn.NOTES_SIZES.warmup_steps),
    "betas": lambda: f"{trn.NOTES_SIZES.betas}",
    "adam_move_median": lambda: _trn_adam()["move_median"],
    "adam_grad_spread": lambda: _trn_adam()["grad_spread"],
    "adam_v_effective_grads_step10": lambda: trn.adam_v_samples(10),
    "adam_v_steady": lambda: trn.adam_v_steady(),
    "adam_v_settle_step": lambda: trn.adam_v_settle_step(),
    "norm_gain_init": trn.norm_gains_at_init,
    "decode_rows": lambda: trn.decode_batch_sizes()["rows"],
    "decode_positions": lambda: trn.decode_batch_sizes()["positions"],
    "assignment_chunk_chars": lambda: make_config("c1", "assignment").chunk_chars,
    "c1_self_cache_mb": lambda: _trn_decode_cache()["c1_self"],
    "c3_self_cache_mb": lambda: _trn_decode_cache()["c3_self"],
    "cross_cache_mb": lambda: _trn_decode_cache()["cross"],
    "cross_cache_gqa_mb": lambda: _trn_decode_cache()["cross_gqa"],
    "grad_clip": lambda: trn.NOTES_SIZES.grad_clip,
    "enc_layer_ffn_share": lambda: trn.layer_ffn_shares()["encoder"],
    "dec_layer_ffn_share": lambda: trn.layer_ffn_shares()["decoder"],
    "spike_damped_noclip": lambda: _trn_spike(False)["damped"],
    "spike_damped_clip": lambda: _trn_spike(True)["damped"],
    "patience": lambda: trn.NOTES_SIZES.patience,
    "token_budget": lambda: f"{trn.NOTES_SIZES.token_budget:,}",
    "max_batch_size": lambda: trn.NOTES_SIZES.max_batch_size,
    "chunk_chars": lambda: CHUNK_CHARS,
    "full_chunk_share": lambda: _trn_byte_waste()["full_share"],
    "waste_bucketed": lambda: _trn_byte_waste()["bucketed"],
    "waste_random": lambda: _trn_byte_waste()["random"],
    # the assignment preset's own training batches (trn.preset_waste)
    "preset_train_chunks": lambda: f"{trn.preset_waste()['examples']:,}",
    "preset_waste_bucketed": lambda: trn.preset_waste()["bucketed"],
    "preset_waste_random": lambda: trn.preset_waste()["random"],
    # the recipe ablation's headline (trn.recipe_summary, cpu preset): its scale, each part's worst run
    "recipe_seeds": lambda: trn.recipe_seeds(),
    # C1 seed 1 on the upper-case docstrings, without the case flip and with every part on (trn.case_flip_upper)
    "ref_upper_exact": lambda: trn.case_flip_upper()["with"],
    "noflip_upper_lost": lambda: trn.case_flip_upper()["with"] - trn.case_flip_upper()["without"],
    "upper_others_within": lambda: trn.case_flip_upper_others(),
    **{f"recipe_{what}": (lambda what=what: trn.recipe_summary()["scale"][what]) for what in ("epochs", "minutes", "threads")},
    "recipe_eos_aware": lambda: trn.recipe_summary()["aware"]["source_eos"],  # the worst source_eos run, length-aware
    "noflip_upper_p": lambda: trn.case_flip_upper()["p"],
    **{f"recipe_lost_{part}": (lambda part=part: trn.recipe_summary()["lost"][part])
       for part in ("phase_embedding", "bit_embeddings", "phase_shuffle", "case_flip", "source_eos", "select_on")},
    # the worst run's McNemar p, the run and set, the lines it decoded with every part on (select_on lost none)
    **{f"recipe_lost_{part}_p": (lambda part=part: trn.recipe_summary()["p"][part])
       for part in ("phase_embedding", "bit_embeddings", "phase_shuffle", "case_flip", "source_eos")},
    **{f"recipe_{what}_{part}": (lambda part=part, what=what: trn.recipe_summary()[what][part])
       for part in ("phase_embedding", "bit_embeddings", "phase_shuffle", "case_flip", "source_eos")
       for what in ("where", "of")},
    **{f"recipe_others_{part}": (lambda part=part: trn.recipe_summary()["others"][part])
       for part in ("phase_embedding", "bit_embeddings", "phase_shuffle", "case_flip", "source_eos", "select_on")},
}


# --------------------------------------------------------------------------- results and the ablation: experiments/results.py

@functools.cache
def _learn_random(name: str) -> float:
    """Percent of random letters' characters right for results/learn/<name>.json (length-aware greedy)."""
    return res.pct(res.read_record(res.run_path("learn") / f"{name}.json")["sets"]["random_letters"]["char_accuracy"])


FACTS["results"] = {
    # the findings that open the chapter
    "res_ref_runs": lambda: len(res.ref_runs()),
    "res_ref_seeds": common.reference_seeds,
    "res_ref_sets": common.reference_sets,
    "res_ref_brown_exact_min": lambda: res.ref_exact_pct(min, ("test_free",)),
    "res_ref_c5_epoch_ratio": lambda: res.ref_epoch_over_c1("c5"),  # as §9.4's cell prints it
    "res_ref_epochs": common.reference_epochs,
    "res_ref_c2_epoch_ratio": lambda: res.ref_epoch_over_c1("c2"),  # seconds per epoch, mean over seeds
    "res_ref_c3_epoch_ratio": lambda: res.ref_epoch_over_c1("c3"),
    "res_ref_c4_epoch_ratio": lambda: res.ref_epoch_over_c1("c4"),
    "res_total_cache_drop_pct": mha.total_cache_drop_pct,  # C3's whole decode cache against C1's (chapter 3)
    "res_goal_chars": lambda: min(res.goal_thresholds()["chars"]),  # ablation.REFERENCE_GOALS
    "res_goal_exact_min": lambda: min(res.goal_thresholds()["exact"]),
    "res_goal_exact_max": lambda: max(res.goal_thresholds()["exact"]),
    "res_ref_c5_time_ratio_min": lambda: min(res.ref_time_ratios("c5")),  # seed by seed
    "res_ref_c5_time_ratio_max": lambda: max(res.ref_time_ratios("c5")),
    # the assignment preset, one epoch on a CPU (results/assignment-cpu): the chapter's lead table
    "res_acpu_lines": lambda: res.assignment_cpu()[("c1", 0)]["sets"]["test"]["lines"],
    "res_acpu_epochs": lambda: max(r["epochs"] for r in res.assignment_cpu().values()),
    "res_acpu_c5_epoch_ratio": lambda: res.over_c1(res.assignment_cpu(), "seconds_per_epoch")[("c5", 0)],
    # its paired tests on the Brown test lines: C1's seeds against each other, C2-C5 against each C1 seed
    "res_acpu_c5_free": lambda: res.acpu_lines("c5", 0, "test_free"),
    "res_aligned_bonferroni": lambda: FACTS["positional"]["aligned_bonferroni"](),
    "res_acpu_c1_free_seeds": lambda: common.seed_by_seed([res.acpu_lines("c1", s, "test_free") for s in (0, 1)]),
    **{f"res_acpu_random_{c}_s{s}": (lambda c=c, s=s: res.acpu_lines(c, s, "random_letters")) for c, s in res.ACPU_RUNS},
    # C5 against C1 (seed 0), the handout's costs; C3's and C4's epochs over C1's
    "res_acpu_c5_peak_ratio": lambda: res.acpu_over_c1("c5", "peak"),
    "res_acpu_c5_step_ratio": lambda: res.acpu_over_c1("c5", "step"),
    "res_acpu_c5_steps": lambda: res.steps_per_epoch(res.assignment_cpu()[("c5", 0)]),
    "res_acpu_c1_steps": lambda: res.steps_per_epoch(res.assignment_cpu()[("c1", 0)]),
    "res_acpu_c2_epoch_ratio": lambda: res.acpu_over_c1("c2", "epoch"),
    "res_acpu_c3_epoch_ratio": lambda: res.acpu_over_c1("c3", "epoch"),
    "res_acpu_c4_epoch_ratio": lambda: res.acpu_over_c1("c4", "epoch"),
    # the noise of the timings: C1's seeds' seconds per epoch, two back-to-back decodings of one model (percent)
    "res_acpu_c1_epoch_spread": lambda: res.pct(res.acpu_epoch_seed_spread()),
    "res_bench_repeat_spread": lambda: res.pct(res.bench_repeat_spread()),
    "res_step_tests": lambda: len(res.recipe_steps()),
    "res_step_gains": lambda: sum(s["p"] < 0.05 and s["gained"] > s["lost"] for s in res.recipe_steps()),
    "res_step_gains_bonferroni": lambda: sum(s["p"] < 0.05 / len(res.recipe_steps()) and s["gained"] > s["lost"]
                                             for s in res.recipe_steps()),
    "res_step_loss_p": lambda: min(s["p"] for s in res.recipe_steps() if s["lost"] > s["gained"]),
    "res_paired_tests": lambda: len(res.paired()),
    "res_paired_below_05": lambda: sum(row["p"] < 0.05 for row in res.paired()),
    "res_paired_min_p": lambda: res.paired_lowest()["p"],
    "res_paired_min_where": lambda: (f"{res.paired_lowest()['config'].upper()}, seed {res.paired_lowest()['seed']}, "
                                     f"{res.paired_lowest()['label']}"),
    "res_paired_min_lost": lambda: res.paired_lowest()["only_base"],
    "res_paired_min_other_p": lambda: res.paired_other_seed()["p"],
    "res_paired_bonferroni": lambda: 0.05 / len(res.paired()),
    "res_gen_c2_brown": lambda: res.generalisation_exact("c2", "brown"),
    "res_gen_c5_brown": lambda: res.generalisation_exact("c5", "brown"),
    "res_gen_brown_lines": lambda: res._one_or_range(res.value(c, "lines", res.EXTENDED_RUN) for c in ("c2", "c5")),
    "res_recipe_bits_exact": lambda: res.recipe_bits()["sets"]["test_free"]["exact_lines"],
    "res_recipe_bits_lines": lambda: res.recipe_bits()["sets"]["test_free"]["lines"],
    "res_recipe_bits_random_chars": lambda: res.pct(res.recipe_bits()["sets"]["random_letters"]["char_accuracy"]),
    # notes/cpu-bits: a smaller BPE over bits (source ids; characters as targets) than the course notes' own
    "res_bits_src_vocab": lambda: res.records(BITS_RUN)["c1"]["hyperparameters"]["src_vocab"],
    "res_notes_src_vocab": lambda: f"{TOKENIZATIONS['notes']['src_vocab']:,}",
    "res_notes_tgt_vocab": lambda: f"{TOKENIZATIONS['notes']['tgt_vocab']:,}",
    # results/learn: the recipe's first steps (phase-preserving shuffles, bit embeddings), random letters' characters
    "res_learn_random_min": lambda: min(_learn_random(f"{c}-shuffle-bits") for c in ("c1", "c3", "c4", "c5")),
    "res_learn_random_max": lambda: max(_learn_random(f"{c}-shuffle-bits") for c in ("c1", "c3", "c4", "c5")),
    "res_learn_c2_random": lambda: _learn_random("c2-shuffle-bits"),
    "res_learn_c2_phase_random": lambda: _learn_random("c2-shuffle-bits-phase"),
    # the same ablation without the key-phase embedding (results/nophase): paired tests against C1, learning curves
    "res_nophase_runs": lambda: len(common.nophase_runs()),
    "res_nophase_tests": common.nophase_tests,
    "res_nophase_below_05": common.nophase_below,
    "res_nophase_bonferroni": common.nophase_bonferroni,
    "res_nophase_repeated": lambda: len(common.nophase_repeated()),
    "res_nophase_alphabet_lines": lambda: common.nophase_lines("random_alphabet"),
    "res_nophase_c1_alphabet_exact": lambda: common.nophase_by_seed("c2", "random_alphabet", "base_exact"),
    "res_nophase_c2_alphabet_exact": lambda: common.nophase_by_seed("c2", "random_alphabet", "exact"),
    "res_nophase_c2_alphabet_p": lambda: common.nophase_by_seed("c2", "random_alphabet", "p", ".2g"),
    "res_aligned_c1_alphabet_exact": lambda: common.aligned_by_seed("c2", "random_alphabet", "base_exact"),
    "res_aligned_c2_alphabet_exact": lambda: common.aligned_by_seed("c2", "random_alphabet", "exact"),
    "res_aligned_c2_alphabet_p": lambda: common.aligned_by_seed("c2", "random_alphabet", "p", ".2g"),
    "res_aligned_c1_test_exact": lambda: common.aligned_by_seed("c2", "test", "base_exact"),  # Brown, length-aware
    **{f"res_nophase_lost_{c}_s{s}": (lambda c=c, s=s: sum(res.lines_lost_without_phase()[(c, s)].values()))
       for c in ("c3", "c4") for s in (0, 1)},  # exact lines lost over the seven sets without the key-phase embedding
    **{f"res_nophase_{c}_s{s}_free": (lambda c=c, s=s: res.nophase_lines(c, s))
       for c, s in (("c1", 0), ("c1", 1), ("c4", 1), ("c5", 1))},  # Brown, free greedy
    # reference against nophase, run by run (McNemar): the embedding on against off
    "res_phase_tests": lambda: sum(len(sets) for sets in res.phase_paired().values()),
    "res_phase_bonferroni": res.phase_bonferroni,
    **{f"res_phase_sets_lost_{c}": (lambda c=c: common.seed_by_seed([res.phase_sets_lost(c, s) for s in (0, 1)]))
       for c in CONFIG_NAMES},  # sets lost past the bar, seed 0 and seed 1
    # results/assignment-cpu: what the lead table rests on
    "res_acpu_cores": lambda: res.readme_cores("assignment-cpu"),  # its README; the records do not hold it
    "res_acpu_bit_miss_max": lambda: 100 - res.acpu_bit_min(),  # bits missed, length-aware (%)
    "res_acpu_free_bit_min": lambda: res.acpu_bit_min("test_free"),
    "res_acpu_c2_random_p": lambda: common.seed_by_seed([r["p"] for r in res.acpu_random_against_c1("c2")], ".2g"),
    "res_acpu_c4_saving": lambda: res.assignment_cpu()[("c1", 0)]["params"] - res.assignment_cpu()[("c4", 0)]["params"],
    "res_ref_c4_saving": lambda: res.ref_runs()[("c1", 0)]["params"] - res.ref_runs()[("c4", 0)]["params"],
    "res_acpu_val_lines": lambda: res.only(r["hyperparameters"]["max_eval_lines"] for r in res.assignment_cpu().values()),
    "res_acpu_label_smoothing": lambda: res.only(r["hyperparameters"]["label_smoothing"]
                                             for r in res.assignment_cpu().values()),
    "res_acpu_smoothing_loss": lambda: -math.log(1 - FACTS["results"]["res_acpu_label_smoothing"]()),  # its loss floor
    # the same Brown test lines decoded freely (the handout's greedy, "test_free"): paired tests against C1
    "res_acpu_free_c2_p_max": lambda: max(res.acpu_test("c2", s, "test_free")["p"] for s in (0, 1)),
    "res_acpu_free_c5_s1_p": lambda: res.acpu_test("c5", 1, "test_free")["p"],
    "res_acpu_free_c3_s1_p": lambda: res.acpu_test("c3", 1, "test_free")["p"],
    "res_acpu_free_c4_p": lambda: common.seed_by_seed([res.acpu_test("c4", s, "test_free")["p"] for s in (0, 1)], ".2g"),
    "res_acpu_c4_free": lambda: res.acpu_lines("c4", 0, "test_free"),
    "res_acpu_c2_free": lambda: res.acpu_lines("c2", 0, "test_free"),
    "res_acpu_c3_free": lambda: res.acpu_lines("c3", 0, "test_free"),
    "res_acpu_c5_params_ratio": lambda: FACTS["blt"]["c5_over_c1_assignment_preset"](),  # seed 0, counted
    "res_acpu_free_seed_gap": lambda: abs(res.acpu_lines("c1", 0, "test_free") - res.acpu_lines("c1", 1, "test_free")),
    "res_acpu_free_seed_p": lambda: res.acpu_seed_test("test_free")["p"],
    "res_acpu_free_c1_best": lambda: max(res.acpu_lines("c1", s, "test_free") for s in (0, 1)),
    "res_acpu_free_headroom": lambda: (FACTS["results"]["res_acpu_lines"]()  # lines C1's better seed left to gain
                                       - FACTS["results"]["res_acpu_free_c1_best"]()),
    "res_acpu_tests": lambda: res.acpu_bonferroni()[0],  # §9.1's paired tests, both greedy rules
    "res_acpu_bonferroni": lambda: res.acpu_bonferroni()[1],
    "res_acpu_c5_p_max": lambda: max(r["p"] for r in res.acpu_paired() if r["other"][0] == "c5"),  # length-aware
    "res_acpu_free_c2_over_c5": lambda: res.acpu_c2_against_c5()["only_c2"],  # free greedy, McNemar
    "res_acpu_free_c5_over_c2": lambda: res.acpu_c2_against_c5()["only_c5"],
    "res_acpu_free_c2_c5_p": lambda: res.acpu_c2_against_c5()["p"],
    "res_acpu_c3_stop_lost": lambda: res.acpu_stop_lost("c3"),  # exact length-aware, not freely
    "res_acpu_free_bit_min_config": lambda: res.acpu_bit_min_config("test_free"),
    "res_aligned_alphabet_lines": lambda: FACTS["positional"]["aligned_alphabet_lines"](),
    # C5's training time over C1's elsewhere: results/nophase seed by seed, the benchmark's one step (blt.json)
    "res_nophase_c5_time_ratio_min": lambda: min(res.ref_time_ratios("c5", "nophase")),
    "res_nophase_c5_time_ratio_max": lambda: max(res.ref_time_ratios("c5", "nophase")),
    # blt.json's setup, not the assignment's: the notes' BPE over bits, its chunk length, the steps it timed
    "res_blt_src_vocab": lambda: f'{blt.benchmark("blt")["bpe"]["src_vocab"]:,}',
    "res_blt_tgt_vocab": lambda: f'{blt.benchmark("blt")["bpe"]["tgt_vocab"]:,}',
    "res_blt_chunk_chars": lambda: blt.benchmark("blt")["training_step"]["chunk_chars"],
    "res_blt_steps_timed": lambda: len(blt.benchmark("blt")["training_step"]["step_times_s"]["c5"]),
    "res_aligned_c4_alphabet_exact": lambda: common.aligned_by_seed("c4", "random_alphabet", "exact"),
    "res_blt_step_ratio": lambda: blt.benchmark("blt")["training_step"]["step_time_ratio_c5_over_c1"],

    # §7.8 Q1: what each metric sees
    "res_drop_bit": lambda: res.pct(res.damaged("drop")["bit_accuracy"]),
    "res_drop_lev": lambda: int(res.damaged("drop")["levenshtein"]),
    "res_drop_bleu": lambda: res.damaged("drop")["bleu"],
    "res_swap_lev": lambda: int(res.damaged("swap")["levenshtein"]),
    "res_swap_bleu": lambda: res.damaged("swap")["bleu"],
    "res_swap_rouge1": lambda: res.damaged("swap")["rouge1"],
    "res_swap_rougeL": lambda: res.damaged("swap")["rougeL"],
    # §7.8 Q3: exact lines against BLEU
    "res_c1c4_exact_min": lambda: min(res.over_c1_c4("sequence_accuracy", scale=100)),
    "res_c1c4_exact_max": lambda: max(res.over_c1_c4("sequence_accuracy", scale=100)),
    "res_c1c4_bleu_min": lambda: min(res.over_c1_c4("bleu")),
    "res_c1c4_bleu_max": lambda: max(res.over_c1_c4("bleu")),
    "res_bits_exact_max": lambda: max(res.over_c1_c4("sequence_accuracy", BITS_RUN, 100)),
    "res_bits_exact_all": lambda: res.only(res.over_c1_c4("sequence_accuracy", BITS_RUN, 100)),  # "for all four"
    "res_exact_pct_at_99pct_chars_256": lambda: res.pct(0.99 ** 256),
    "res_longest_line": lambda: max(res.test_line_lengths()),
    "res_c1_cer": lambda: res.pct(res.value("c1", "char_error_rate")),
    "res_c1_exact": lambda: res.exact_pct("c1"),
    "res_c1_exact_if_chars_independent": lambda: res.pct(res.exact_if_independent("c1")),
    # §7.8 Q4: BLEU and ROUGE depend on their units
    "res_bleu_words": lambda: res.bleu_by_unit("13a"),
    "res_bleu_chars": lambda: res.bleu_by_unit("char"),
    "res_c5_chrf": lambda: res.value("c5", "chrf"),
    "res_c1_chrf": lambda: res.value("c1", "chrf"),
    "res_c1_epochs": lambda: res.records()["c1"]["epochs"],  # the time-budget run: unequal epochs
    "res_c5_epochs": lambda: res.records()["c5"]["epochs"],
    # §7.8 Q5: two rows
    "res_levenshtein_kitten_sitting": lambda: levenshtein("kitten", "sitting"),
    "res_full_cells": lambda: (max(res.test_line_lengths()) + 1) ** 2,
    "res_two_rows": lambda: 2 * (max(res.test_line_lengths()) + 1),
    # §7.8 Q6: greedy vs beam
    "res_beam_lines": lambda: res.beam()["c5"]["greedy"]["lines"],
    "res_beam_width": lambda: int(res.beam_width("c5").removeprefix("beam")),
    "res_beam_c2_greedy": lambda: res.beam_exact("c2", "greedy"),
    "res_beam_c2_beam": lambda: res.beam_exact("c2", "beam"),
    "res_beam_c5_greedy": lambda: res.beam_exact("c5", "greedy"),
    "res_beam_c5_beam": lambda: res.beam_exact("c5", "beam"),
    "res_beam_c5_lowest_p": lambda: res.beam_lowest_p("c5"),
    # §7.8 Q7: what the KV cache saves
    "res_chunk_chars": res.run_chunk_chars,
    "res_uncached_positions": lambda: res.triangle(res.run_chunk_chars() + 1),
    "res_cached_positions": lambda: res.run_chunk_chars() + 1,
    "res_bench_lines": lambda: res.decode_benchmark()["c5"]["lines_per_second"]["lines"],
    "res_bench_c1_lps": lambda: res.bench_lps("c1"),
    "res_bench_c2_lps": lambda: res.bench_lps("c2"),
    "res_bench_c5_lps": lambda: res.bench_lps("c5"),
    "res_bench_c5_cache_bytes": lambda: res.decode_benchmark()["c5"]["cache"]["target_tokens"],
    "res_bench_c5_cache_speedup": lambda: res.decode_benchmark()["c5"]["cache"]["speedup"],
    "res_bench_beam_cost_min": lambda: min(res.bench_beam_cost()),
    "res_bench_beam_cost_max": lambda: max(res.bench_beam_cost()),
    # §7.9 Q1: what one change at a time guarantees
    "res_budget_minutes": lambda: res.records()["c1"]["hyperparameters"]["time_budget_s"] / 60,
    "res_epochs_min": lambda: min(r["epochs"] for r in res.records().values()),
    "res_epochs_max": lambda: max(r["epochs"] for r in res.records().values()),
    "res_equal_epochs": lambda: res.records(EQUAL_EPOCHS_RUN)["c1"]["epochs"],
    # §7.9 Q1: C4 at equal epochs and in the time-budget run
    "res_equal_c4_exact": lambda: res.against_c1("c4", "sequence_accuracy"),
    "res_equal_c4_se": lambda: res.se_against_c1("c4"),
    "res_c4_controlled_exact": lambda: res.against_c1("c4", "sequence_accuracy", res.RUN),
    # §7.9 Q3: C5
    # §7.9 Q4: the slot already spent on bits vs bytes
    "res_bytes_bit_min": lambda: min(res.over_c1_c4("bit_accuracy", scale=100)),
    "res_bytes_bit_max": lambda: max(res.over_c1_c4("bit_accuracy", scale=100)),
    "res_bits_bit_min": lambda: min(res.over_c1_c4("bit_accuracy", BITS_RUN, 100)),
    "res_bits_bit_max": lambda: max(res.over_c1_c4("bit_accuracy", BITS_RUN, 100)),
    # §7.9 Q5: what peak memory means here, C1 and C5 at the assignment preset (results/assignment-cpu, seed 0)
    "res_c1_peak_mib": lambda: res.assignment_cpu()[("c1", 0)]["peak_memory_bytes"] / 2**20,
    "res_c5_peak_mib": lambda: res.assignment_cpu()[("c5", 0)]["peak_memory_bytes"] / 2**20,
    "res_c1_state_mib": lambda: res.BYTES_PER_PARAM_TRAINING * res.assignment_cpu()[("c1", 0)]["params"] / 2**20,
    "res_c5_state_mib": lambda: res.BYTES_PER_PARAM_TRAINING * res.assignment_cpu()[("c5", 0)]["params"] / 2**20,
    "res_c1_state_share": lambda: (res.assignment_cpu()[("c1", 0)]["params"] * res.BYTES_PER_PARAM_TRAINING
                                   / res.assignment_cpu()[("c1", 0)]["peak_memory_bytes"]),
    # §7.9 Q6: fewest parameters, the assignment preset as trained (aligned BPE) and with the course notes' BPEs
    "res_fewest_assignment": lambda: res.fewest(res.assignment_params()),
    **{f"res_acpu_{name}_params": (lambda name=name: res.assignment_cpu()[(name, 0)]["params"])
       for name in ("c1", "c3", "c4", "c5")},
    **{f"res_{name}_params": (lambda name=name: res.assignment_params()[name]) for name in ("c1", "c3")},
    "res_heads": lambda: make_config("c3", "assignment").n_heads,
    "res_kv_heads": lambda: make_config("c3", "assignment").n_kv_heads,
    "res_self_attn_modules": res.self_attention_modules,
    "res_c3_per_module": res.c3_saving_per_module,  # the same with either BPE
    "res_norm_layers": res.norm_layers,
}


# --------------------------------------------------------------------------- broken models: experiments/broken.py

FACTS["broken"] = {
    # 11.1 the causal mask
    "tiny_train_steps": lambda: brk.default_argument(broken.train_and_decode, "steps"),
    "chance_char_accuracy": lambda: 1 / (ord("z") - ord("a") + 1),  # random lowercase lines
    "nomask_teacher_forced_acc": lambda: brk.trainings()["no_mask"]["teacher_forced_acc"],
    "nomask_greedy_acc": lambda: brk.trainings()["no_mask"]["greedy_acc"],
    "real_teacher_forced_acc": lambda: brk.trainings()["real"]["teacher_forced_acc"],
    "real_greedy_acc": lambda: brk.trainings()["real"]["greedy_acc"],
    "nomask_future_leak": lambda: broken.future_leak(broken.tiny(broken.NoCausalMask)),
    # 11.2 the target shift
    "shift_steps": lambda: broken.SHIFT_STEPS,
    "unshifted_train_loss": lambda: brk.trainings()["unshifted"]["train_loss"],
    "unshifted_teacher_forced_loss": lambda: brk.trainings()["unshifted"]["teacher_forced_loss"],
    "unshifted_greedy_acc": lambda: brk.trainings()["unshifted"]["greedy_acc"],
    "chance_loss": lambda: math.log(VOCAB_SIZE),
    "unshifted_answer_share": lambda: broken.answer_in_input(broken.unshifted_pair),
    # 11.3 PAD in the loss
    "pad_loss_real": lambda: brk.pad_losses()["real"]["loss"],
    "pad_loss_broken": lambda: brk.pad_losses()["broken"]["loss"],
    "pad_loss_broken_longer": lambda: brk.pad_losses()["broken"]["loss_longer"],
    "pad_share_longer": lambda: brk.pad_losses()["broken"]["pad_share"],
    # 11.6 heads without transpose
    "heads_future_leak": lambda: broken.mha_future_leak(broken.tiny_attention(broken.HeadsWithoutTranspose)),
    "heads_future_leak_real": lambda: broken.mha_future_leak(broken.tiny_attention()),
    # 11.9 RoPE under the KV cache
    "cache_gap_real": lambda: broken.cache_gap(broken.tiny(pos_encoding="rope")),
    "cache_gap_broken": lambda: broken.cache_gap(broken.tiny(broken.RopeCacheWithoutOffset)),
    # 11.10 dropout at evaluation
    "eval_repeat_share": lambda: broken.repeat_gap(broken.decode_without_eval),
    "eval_dropout": lambda: broken.EVAL_DROPOUT,
    "cpu_dropout": lambda: make_config("c1", "cpu").dropout,
    "assignment_dropout": lambda: make_config("c1", "assignment").dropout,
    # 11.14 chunks of 253: at most one mapping per distinct key byte
    "key_distinct_bytes": lambda: len(set(KEY)),
    # 11.13 the BLT's own-patch mask
    "blt_leak_share": lambda: broken.blt_answer_leak(broken.tiny_blt(broken.OwnPatchBLT)),
}


def load_facts(chapter: str) -> dict[str, Callable[[], object]]:
    """The facts of one chapter, {key: zero-argument callable} (a chapter must have an entry, even an empty one)."""
    if chapter not in FACTS:
        raise ModuleNotFoundError(f"no facts for chapter {chapter!r}: add FACTS[{chapter!r}] = {{}} to {__file__} "
                                  f"(and its experiments to book/cipherbook/experiments/{chapter}.py)")
    facts = FACTS[chapter]
    if not isinstance(facts, dict) or not all(callable(f) for f in facts.values()):
        raise TypeError(f"{__file__}: FACTS[{chapter!r}] must be a dict of zero-argument callables")
    return facts
