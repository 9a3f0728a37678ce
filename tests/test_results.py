"""cipherlab.results: reading the committed results, the comparison table, and attention at character level."""

import json
import math
import shutil

import pytest
import torch

from cipherlab import results
from cipherlab.config import make_config
from cipherlab.data import load_corpus
from cipherlab.train import fit_codec, select_lines

SMOKE = results.REPO_RESULTS_DIR / "smoke"


@pytest.fixture(autouse=True)
def repository_results(monkeypatch):
    """Run names resolve in the repository's results/ whatever the environment says."""
    monkeypatch.delenv(results.RESULTS_ENV, raising=False)


@pytest.fixture
def run_copy(tmp_path):
    """A writable copy of results/smoke."""
    folder = tmp_path / "run"
    shutil.copytree(SMOKE, folder)
    return folder


def test_load_run_reads_every_configuration_of_the_smoke_run():
    records = results.load_run("smoke")
    assert list(records) == ["c1", "c2", "c3", "c4", "c5"]
    assert all(0.0 <= results.metric(r, "bit_accuracy") <= 1.0 for r in records.values())
    assert results.metric(records["c5"], "bleu") is None  # not comparable for the token-free C5


def test_a_run_name_and_a_path_name_the_same_folder():
    assert results.load_run("smoke") == results.load_run(SMOKE)


def test_results_dir_follows_the_environment(monkeypatch, run_copy):
    monkeypatch.setenv(results.RESULTS_ENV, str(run_copy.parent))
    assert results.run_path("run") == run_copy and list(results.load_run("run")) == list(results.load_run(SMOKE))


def test_broken_json_is_an_error_naming_the_file(run_copy):
    (run_copy / "c3.json").write_text('{"config": "c3", "test": {', encoding="utf-8")
    with pytest.raises(ValueError, match=r"c3\.json: not valid JSON"):
        results.load_run(run_copy)


def test_a_record_missing_a_field_is_an_error_naming_file_and_field(run_copy):
    record = json.loads((run_copy / "c2.json").read_text())
    del record["test"]["bit_accuracy"]
    (run_copy / "c2.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"c2\.json: missing field\(s\) test\.bit_accuracy"):
        results.load_run(run_copy)


def test_a_missing_run_folder_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such results folder"):
        results.load_run(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="none of c1.json"):
        results.load_run(tmp_path)


def test_a_run_may_lack_configurations(run_copy):
    (run_copy / "c5.json").unlink()
    assert list(results.load_run(run_copy)) == ["c1", "c2", "c3", "c4"]


def test_optional_files_are_none_when_absent_and_read_when_present(run_copy):
    assert results.load_curve(run_copy, "c2") is None
    assert results.load_beam(run_copy) is None and results.load_generalisation(run_copy) is None
    log = [{"epoch": 1, "train_loss": 3.0, "val_loss": 2.5, "seconds": 10.0, "tokens_per_s": 100.0}]
    (run_copy / "c2.log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    (run_copy / "beam.json").write_text(json.dumps({"c2": {"greedy": {"bit_accuracy": 0.5}}}))
    assert results.load_curve(run_copy, "c2") == log
    assert results.metric(results.load_beam(run_copy)["c2"]["greedy"], "bit_accuracy") == 0.5


def test_beam_and_generalisation_keep_only_configurations_and_provenance_reads_about(run_copy):
    about = {"command": "python results/extras.py", "git_commit": "0123456789abcdef"}
    (run_copy / "beam.json").write_text(json.dumps({"about": about, "c5": {"greedy": {}}, "c2": {"greedy": {}}}))
    assert list(results.load_beam(run_copy)) == ["c2", "c5"]
    assert results.provenance(run_copy, "beam.json") == "python results/extras.py (commit 0123456789ab)"
    assert results.provenance(run_copy, "generalisation.json") == "not recorded"


def test_a_broken_curve_is_an_error_naming_the_file(run_copy):
    (run_copy / "c1.log.jsonl").write_text('{"epoch": 1}\n{"epoch": \n')
    with pytest.raises(ValueError, match=r"c1\.log\.jsonl: line 2"):
        results.load_curve(run_copy, "c1")


def test_comparison_table_has_a_row_per_configuration_and_the_reported_figures():
    table = results.comparison_table("smoke")
    lines = table.splitlines()
    header = lines[0].split(" | ")
    rows = [line for line in lines if line.startswith("| C")]
    assert [r.split(" | ")[0] for r in rows] == ["| C1", "| C2", "| C3", "| C4", "| C5"]
    assert all(len(r.split(" | ")) == len(header) for r in rows)
    assert "71.2" in rows[0] and "92.7" in rows[0]  # course notes' and best public C1 bit accuracy
    assert "seed 000" in table and "issue #9" in table


def test_comparison_table_adds_the_bits_run_when_given(run_copy):
    (run_copy / "c5.json").unlink()  # a bits-mode run has no C5
    table = results.comparison_table("smoke", run_copy)
    assert "bits mode: bit acc %" in table
    c5 = next(line for line in table.splitlines() if line.startswith("| C5"))
    assert c5.split(" | ")[12:14] == ["–", "–"]


def test_every_configuration_has_every_reference_field_and_every_figure_a_source():
    for kind in results.REFERENCES.values():
        for figures in kind["configs"].values():
            assert set(figures) == set(results.REFERENCE_FIELDS)
            assert all(f.source for f in figures.values() if f is not None)
    assert results.reference("seed", "c1", "bit_accuracy") == 0.712
    assert results.reference("seed", "c2", "bit_accuracy") is None  # the notes give no C2 figure
    assert results.reference("public", "c5", "exact_lines") == 0.93


def test_difference_and_the_sampling_error_of_exact_lines():
    records = results.load_run("smoke")
    d = results.difference(records, "c2", "bit_accuracy")
    assert d == pytest.approx(records["c2"]["test"]["bit_accuracy"] - records["c1"]["test"]["bit_accuracy"])
    assert results.difference(records, "c5", "bleu") is None
    assert results.exact_lines_stderr({"test": {"sequence_accuracy": 0.5, "lines": 100}}) == pytest.approx(0.05)


def test_tokenization_reads_the_units_from_the_hyperparameters():
    records = results.load_run("smoke")
    assert results.tokenization(records["c1"]) == "source: BPE over cipher bits, 64 tokens; target: BPE, 128 tokens"
    hp = {**records["c1"]["hyperparameters"], "source_mode": "bytes", "src_vocab": None, "tgt_vocab": None}
    assert results.tokenization({"hyperparameters": hp}) == "source: cipher bytes, no merges; target: characters"
    assert "no tokenizer" in results.tokenization(records["c5"])


def test_plots_return_figures_without_touching_pyplot():
    import matplotlib.pyplot as plt

    records = results.load_run("smoke")
    before = plt.get_fignums()
    figures = [results.plot_accuracy(records, records), results.plot_costs(records),
               results.plot_curves({"c1": [{"epoch": 1, "val_loss": 2.0, "seconds": 60.0}], "c5": None})]
    assert all(f.axes for f in figures) and plt.get_fignums() == before


# --------------------------------------------------------------------------- attention at character level


def test_single_character_tokens_map_to_the_same_grid():
    weights = torch.softmax(torch.randn(2, 5, 5), -1)  # (H, T, T)
    cover = results.coverage([1] * 5, 1)
    assert torch.allclose(results.to_characters(weights, cover, cover), weights)


def test_a_token_spreads_its_weight_over_its_characters_and_rows_still_sum_to_one():
    # query: 3 characters as one token of 2 and one of 1; key: cipher bits, tokens of 8 and 16 bits
    q, k = results.coverage([2, 1], 1), results.coverage([8, 16], 8)
    weights = torch.tensor([[[1.0, 0.0], [0.25, 0.75]]])  # (1, 2, 2)
    chars = results.to_characters(weights, q, k)
    assert torch.allclose(chars[0], torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.25, 0.375, 0.375]]))


def test_a_bits_token_that_straddles_characters_is_shared_by_both():
    cover = results.coverage([4, 8, 4], 8)  # bits 0-3, 4-11, 12-15 over two characters
    assert cover.tolist() == [[4.0, 0.0], [4.0, 4.0], [0.0, 4.0]]


def test_band_mass_and_same_phase_share_measure_what_they_say():
    L = 24
    eye = torch.eye(L)
    shifted = torch.zeros(L, L)
    for i in range(L):
        shifted[i, (i + 8) % L] = 1.0  # every query reads the character 8 (or 16) away: same key byte
    assert results.band_mass(eye).item() == 1.0 and results.band_mass(shifted).item() == 0.0
    assert results.same_phase_share(shifted).item() == pytest.approx(1.0)
    assert results.uniform_same_phase_share(L) == pytest.approx(2 / 23)  # 2 of the 23 other positions
    values, profile = results.offset_profile(shifted)
    assert profile[values.tolist().index(8)].item() == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["c2", "c5"])
def test_attention_view_maps_every_moduleto_characters(name):
    config = make_config(name, "smoke")
    corpus = select_lines(load_corpus(), config)
    codec = fit_codec(config, corpus)
    torch.manual_seed(0)
    model = codec.build_model(config)
    chunks = results.example_chunks(config, 2, corpus=corpus)
    view = results.attention_view(model, codec, chunks, name.upper())
    L = config.chunk_chars
    expected = {"encoder self", "cross"} | ({"global encoder self"} if name == "c5" else set())
    assert set(view.kinds) == expected and view.texts == [c.plain for c in chunks]
    for weights in view.maps.values():
        assert weights.shape == (2, config.n_heads, L, L)
        assert torch.allclose(weights.sum(-1), torch.ones(2, config.n_heads, L), atol=1e-5)
    figures = [results.plot_heads(view, "cross", 0), results.plot_offsets(view, "encoder self", 0)]
    assert all(f.axes for f in figures)


# --------------------------------------------------------------------------- runs that go on, targets, errors.json


def test_a_nested_run_name_lives_in_the_results_folder(monkeypatch, tmp_path):
    nested = tmp_path / "extended" / "cpu"
    nested.mkdir(parents=True)
    shutil.copy(SMOKE / "c2.json", nested / "c2.json")
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    monkeypatch.chdir(tmp_path / "extended")  # the name must not depend on the working directory
    assert results.run_path("extended/cpu") == nested
    assert list(results.load_run("extended/cpu")) == ["c2"]


def _metrics(bit, exact, cer=0.01):
    return {"lines": 4, "bit_accuracy": bit, "sequence_accuracy": exact, "levenshtein": 1.0,
            "char_error_rate": cer, "chrf": 90.0}


def _entry(free=(0.98, 0.5), aware=(0.999, 0.6), chunk=None, phase=None, lengths=(40, 40, 70, 100), wrong=1,
           examples=()):
    bins = [{"chars": [0, 50], "lines": sum(n < 50 for n in lengths), "exact": 0.5},
            {"chars": [50, 10**6], "lines": sum(n >= 50 for n in lengths), "exact": 0.0}]
    return {"test_free": _metrics(*free), "test_length_aware": _metrics(*aware), "lines": len(lengths),
            "lines_with_wrong_length": wrong, "char_error_by_chunk_position": chunk or [0.01] * 32,
            "char_error_by_key_phase": phase or [0.01] * 8, "exact_lines_by_length": bins, "chunks": 9,
            "exact_chunks": 0.8, "errors": list(examples)}


def test_targets_are_checked_for_every_model_and_decoding():
    records = results.load_run("smoke")
    records = {name: {**records[name], "test": _metrics(bit, exact)}
               for name, bit, exact in [("c1", 0.985, 0.2), ("c2", 0.9995, 0.96)]}
    errors = {"cpu/c1": _entry(aware=(0.995, 0.3))}
    rows = results.target_rows({"cpu": records}, errors)
    assert [(r["config"], r["decoding"]) for r in rows] == [("c1", "free"), ("c1", "length-aware"), ("c2", "free")]
    assert [[ok for _, _, ok in r["checks"]] for r in rows] == [[False], [True], [True, True, True]]
    table = results.targets_table(rows)
    assert "| C1 | cpu, " in table and "missed: bit acc ≥ 99 %" in table and table.count("all met") == 2
    verdicts = results.targets_verdict(rows)
    assert verdicts[0] == "C1 meets its target (bit acc ≥ 99 %) with cpu length-aware"
    assert verdicts[1].startswith("C2 meets its targets")


def test_a_missed_target_names_the_closest_model_and_its_shortfall():
    record = {**results.load_run("smoke")["c2"], "test": _metrics(0.9991, 0.90)}
    rows = results.target_rows({"cpu": {"c2": record}})
    assert results.targets_verdict(rows) == [
        "no C2 model meets all of its targets (bit acc ≥ 99 %, bit acc ≥ 99.9 %, exact lines ≥ 95 %); "
        "the closest is cpu free, which meets bit acc ≥ 99 %, bit acc ≥ 99.9 % (exact lines 90.0 %)"]
    record = {**record, "test": _metrics(0.98, 0.5)}
    verdict = results.targets_verdict(results.target_rows({"cpu": {"c2": record}}))[0]
    assert verdict.endswith("the closest is cpu free (bit acc 98.00 %, exact lines 50.0 %)")  # one figure per metric


def test_errors_json_entries_are_found_under_the_names_analysis_gave_them(run_copy):
    (run_copy / "errors.json").write_text(json.dumps({"about": {}, "cpu/c1": _entry(), "cpu-long/c2": _entry()}))
    errors = results.load_errors(run_copy)
    assert list(errors) == ["cpu/c1", "cpu-long/c2"]
    assert results.error_entry(errors, results.EXTENDED_RUN, "c2") is errors["cpu-long/c2"]
    assert results.error_entry(None, "cpu", "c1") is None
    assert results.entry_label("cpu-long/c2") == "C2, extended/cpu"


def test_free_and_length_aware_decoding_side_by_side():
    errors = {"cpu/c1": _entry(free=(0.98, 0.5), aware=(0.999, 0.75), wrong=2)}
    assert results.decoding_gains(errors)["cpu/c1"] == pytest.approx(0.019)
    assert "| C1, cpu | 2 of 4 | 98.00 | 99.90 | 50.0 | 75.0 |" in results.decoding_table(errors)
    # one more exact line of the two given the right length: half, so not "most also held a wrong character"
    assert results.decoding_verdict(errors).endswith("their length was most of what kept those lines from being exact")


def test_position_counts_and_the_excess_over_the_pooled_rate():
    assert results.position_counts([10, 3], 8) == [3, 3, 2, 1, 1, 1, 1, 1]
    assert results.excess([0.01] * 4, [1000] * 4) == pytest.approx([0.0] * 4)
    z = results.excess([0.01, 0.01, 0.01, 0.05], [1000] * 4)
    assert z[3] > results.SPIKE_Z and all(v < 0 for v in z[:3])


def test_the_profile_flags_an_unlearned_key_phase_and_rising_chunks_but_not_noise():
    lengths = [256] * 40
    flat = results.profile_rows({"cpu/c1": _entry(lengths=lengths, wrong=0)}, lengths)
    verdict = results.profile_verdict(flat)
    assert verdict["chunk"].startswith("in none of the 1 models") and verdict["phase"].startswith("nor does")
    assert "is not what limits them" in verdict["trend"]
    phase = [0.01] * 8
    phase[3] = 0.5  # every character at key phase 3 is wrong half the time
    rising = [0.002] * 16 + [0.03] * 16
    rows = results.profile_rows({"cpu/c1": _entry(lengths=lengths, wrong=0, phase=phase, chunk=rising)}, lengths)
    verdict = results.profile_verdict(rows)
    assert rows[0]["phase"] == 3 and verdict["phase"].startswith("some key phases stand out: C1, cpu at phase 3")
    assert "the mark of exposure bias" in verdict["trend"]
    with pytest.raises(ValueError, match="covers 40 lines, but 3 lengths"):
        results.profile_rows({"cpu/c1": _entry(lengths=lengths)}, [1, 2, 3])


def test_edits_name_substitutions_drops_and_additions_once_with_every_model():
    chunk = "The jury met at 10 a.m. Monday." + "x"  # 32 characters
    ref = chunk + "Then it went home."
    substituted = ref.replace("10", "18")
    dropped = chunk[:23] + ref[32:]  # the first chunk ended early, after "a.m."
    examples = [{"line": 3, "reference": ref, "prediction": substituted}]
    errors = {"cpu/c1": _entry(examples=examples), "cpu/c2": _entry(examples=examples),
              "cpu/c3": _entry(examples=[{"line": 3, "reference": ref, "prediction": dropped},
                                         {"line": 5, "reference": "Yes.", "prediction": "Yes.."}])}
    items = results.edits(errors)
    assert [(i["op"], i["reference"], i["prediction"], i["models"]) for i in items] == [
        ("substitute", "0", "8", ["C1, cpu", "C2, cpu"]), ("drop", chunk[23:], "", ["C3, cpu"]),
        ("add", "", ".", ["C3, cpu"])]
    train = ["at 18 and at 18 and at 10"]
    summary = results.edit_summary(items, train, [ref])
    assert summary["kinds"] == {"digit": 1} and summary["prior"] == {"prediction": 1}
    assert (summary["at_full_stop"], summary["drops"], summary["to_chunk_end"]) == (2, 1, 1)
    verdict = results.edit_verdict(summary)
    assert verdict["substitutions"].startswith("the 1 substitution replaces 1 digit")
    assert "prior outvoted the cipher" in verdict["prior"]
    assert "1 of the 1 drops runs exactly to the end" in verdict["length"] and "section 9.5" in verdict["length"]
    assert verdict["reading"].startswith("the errors are not confined to rare characters")  # "0" is common here
    table = results.edit_table(items, train)
    assert table.count("\n| C") == 3 and "[0→8]" in table


def test_exact_lines_by_length_beside_independent_errors():
    lengths = [40, 40, 70, 100]
    rows = results.exact_by_length(_entry(lengths=lengths), lengths)
    assert [r["lines"] for r in rows] == [2, 2]
    assert rows[0]["independent"] == pytest.approx(0.99 ** 40)
    assert rows[1]["independent"] == pytest.approx((0.99 ** 70 + 0.99 ** 100) / 2)
    assert results.length_verdict(_entry(lengths=lengths), lengths).startswith("exact lines fall from 50.0 %")
    with pytest.raises(ValueError, match="holds 2 lines in errors.json but 1"):
        results.exact_by_length(_entry(lengths=lengths), [40, 70, 100])


def test_a_resumed_curve_continues_the_controlled_one_whichever_epochs_its_log_holds():
    controlled = [{"epoch": e, "val_loss": 1.0 / e, "seconds": 60.0} for e in (1, 2, 3)]
    later = [{"epoch": e, "val_loss": 0.5 / e, "seconds": 60.0} for e in (4, 5)]
    merged = results.merge_curves(controlled, later)
    assert [r["epoch"] for r in merged] == [1, 2, 3, 4, 5]
    assert results.merge_curves(controlled, controlled + later) == merged
    assert results.common_epoch({"c1": controlled, "c2": merged, "c5": None}) == 3
    assert results.loss_at_epoch({"c1": controlled, "c2": merged}, 2) == {"c1": 0.5, "c2": 0.5}


def test_budget_and_extended_tables_put_epochs_beside_accuracy():
    records = results.load_run("smoke")
    curves = {"c1": [{"epoch": 1, "val_loss": 2.0, "seconds": 50.0}, {"epoch": 2, "val_loss": 1.0, "seconds": 70.0}]}
    table = results.budget_table({"c1": records["c1"]}, curves)
    assert "val loss, epoch 2" in table and "| 50–70 | 2.0000 | 1.0000 |" in table
    longer = {"c2": {**records["c2"], "epochs": 9}}
    five = {"c2": {**records["c2"], "epochs": 5}}
    table = results.extended_table({"cpu": records, "equal-epochs/cpu": five, "extended/cpu": longer},
                                   {"cpu-long/c2": _entry(aware=(0.9999, 0.97))})
    assert table.count("\n| C2 |") == 3 and "| extended/cpu | 9 |" in table and "99.99 | 97.0 |" in table
    assert "| C2 | equal-epochs/cpu | 5 |" in table and "| C1 |" not in table  # only the last stage's configurations


def _judged(exact_by_config, lines=200, epochs=5):
    records = results.load_run("smoke")
    return {name: {**records[name], "epochs": epochs, "seed": 0,
                   "hyperparameters": {**records[name]["hyperparameters"], "time_budget_s": None},
                   "test": {**_metrics(0.99 + exact / 100, exact), "lines": lines}}
            for name, exact in exact_by_config.items()}


def test_a_single_change_counts_only_beyond_twice_the_binomial_error_of_the_difference():
    records = _judged({"c1": 0.5, "c2": 0.6, "c3": 0.55, "c4": 0.4, "c5": 0.2})
    se = results.exact_difference_stderr(records, "c2")
    assert se == pytest.approx(math.hypot(math.sqrt(0.25 / 200), math.sqrt(0.24 / 200)))
    rows = {r["config"]: r for r in results.single_change_rows(records)}
    assert [rows[c]["reading"] for c in ("c2", "c3", "c4", "c5")] == ["better", "within noise", "worse", "worse"]
    assert rows["c2"]["exact"] == pytest.approx(0.1) and rows["c2"]["change"] == "pos_encoding=rope"
    assert "better than C1" in results.ablation_table(records) and "within 2 s.e." in results.ablation_table(records)


def test_the_ablation_at_equal_epochs_is_read_against_the_time_budget_run():
    controlled = {n: {**r, "epochs": e} for (n, r), e in
                  zip(_judged({"c1": 0.5, "c2": 0.5, "c3": 0.6, "c4": 0.5, "c5": 0.1}).items(), (3, 3, 4, 5, 2))}
    equal = _judged({"c1": 0.5, "c2": 0.62, "c3": 0.55, "c4": 0.5, "c5": 0.3})
    table = results.equal_epochs_table(controlled, equal)
    assert "| C2 | pos_encoding=rope | 3 | 5 |" in table and "| C1 | baseline | 3 | 5 |" in table
    assert table.splitlines()[2].endswith("| baseline |")
    reading = results.equal_epochs_reading(equal, controlled)
    assert reading["epochs"] == ("every configuration trained exactly 5 epochs with no time budget "
                                 "(C4 had as many in the time-budget run already, so it was only scored again)")
    assert reading["inside"].startswith("at equal epochs only C2 beat C1 beyond the noise, as the course notes")
    assert reading["c5"].startswith("after 5 epochs each, C5 trails C1: -20.0 ± ")
    assert reading["moved"] == ("against the time-budget run, the reading changed for C2 (within noise → better), "
                                "C3 (better → within noise)")
    assert "better than C1: C2 +12.0 ± " in reading["changes"]
    assert reading["caveat"].startswith("each configuration was")
    uneven = {**equal, "c3": {**equal["c3"], "epochs": 4}}
    assert results.equal_epochs_reading(uneven)["epochs"].startswith("the epochs still differ (C1 5, C2 5, C3 4")
    assert "moved" not in results.equal_epochs_reading(uneven)


def test_a_continued_run_names_what_it_continued_and_how_from_its_record():
    three = [{"epoch": e, "val_loss": 1.0 / e} for e in (1, 2, 3)]
    five = three + [{"epoch": e, "val_loss": 1.0 / e} for e in (4, 5)]
    later = five + [{"epoch": 6, "val_loss": 0.1}]
    other = [{"epoch": 1, "val_loss": 0.9}]
    assert results.continued_from(later, {"cpu": three, "equal-epochs/cpu": five, "x": other, "y": None}) == \
        "equal-epochs/cpu"
    assert results.continued_from(five, {"equal-epochs/cpu": five}) is None  # nothing was added
    assert results.continued_from(None, {"cpu": three}) is None
    record = {"config": "c2", "epochs": 9, "stopped": "time budget",
              "hyperparameters": {"time_budget_s": 900.0, "max_epochs": 100}}
    assert results.continuation(record, {"epochs": 5}) == \
        "C2 from 5 to 9 epochs, with a time budget of 900 s (15 minutes) and max_epochs 100, stopped by time budget"
    unbounded = {**record, "epochs": 5, "stopped": "max_epochs", "hyperparameters": {"time_budget_s": None,
                                                                                     "max_epochs": 5}}
    assert results.continuation(unbounded) == ("C2 5 epochs in all, with no time budget and max_epochs 5, "
                                               "stopped by max_epochs")


def test_new_plots_return_figures_without_touching_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    log = [{"epoch": e, "val_loss": 1.0 / e, "seconds": 60.0} for e in (1, 2, 3)]
    figures = [results.plot_extended({"c2": (log[:2], log), "c5": (None, log)}),
               results.plot_error_profiles({"cpu/c1": _entry(), "cpu-long/c2": _entry()})]
    assert all(f.axes for f in figures) and plt.get_fignums() == before


def test_generalisation_is_set_against_the_run_it_is_given():
    records = results.load_run("smoke")
    general = {"c2": {"lines": 9, "bit_accuracy": 0.5, "sequence_accuracy": 0.0, "char_error_rate": 0.5, "chrf": 10.0}}
    table = results.generalisation_table({"c2": {**records["c2"], "test": _metrics(0.9991, 0.9)}}, general)
    assert "| C2 | Brown test lines | 4 | 99.91 | 90.0 |" in table and "| C2 | stdlib docstrings | 9 | 50.00 |" in table
    assert "| C2 | Brown test lines | ? | – | – |" in results.generalisation_table({}, general)


def test_trained_on_finds_the_run_each_extended_log_continues(monkeypatch, tmp_path):
    record = results.load_run("smoke")["c2"]
    logs = {"cpu": (3, None), "equal-epochs/cpu": (5, None), "extended/cpu": (8, 900.0)}
    for run, (epochs, budget) in logs.items():
        folder = tmp_path / run
        folder.mkdir(parents=True)
        r = {**record, "epochs": epochs, "stopped": "time budget",
             "hyperparameters": {**record["hyperparameters"], "time_budget_s": budget, "max_epochs": 100}}
        (folder / "c2.json").write_text(json.dumps(r))
        (folder / "c2.log.jsonl").write_text("".join(json.dumps({"epoch": e, "val_loss": 1.0 / e}) + "\n"
                                                     for e in range(1, epochs + 1)))
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    stages = {run: results.load_run(run) for run in ("cpu", "equal-epochs/cpu")}
    history = results.trained_on(stages, results.load_run("extended/cpu"))
    assert history["c2"]["source"] == "equal-epochs/cpu" and history["c2"]["before"]["epochs"] == 5
    assert history["c2"]["how"] == ("C2 from 5 to 8 epochs, with a time budget of 900 s (15 minutes) and max_epochs "
                                    "100, stopped by time budget, continuing results/equal-epochs/cpu")
