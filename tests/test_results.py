"""cipherlab.results: reading the committed results, the comparison table, and attention at character level."""

import json
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
