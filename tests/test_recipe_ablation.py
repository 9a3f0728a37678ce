"""The recipe ablation (``results/recipe``: C1 and C2 with one part of the default recipe off) and the
no-phase ablation (``results/nophase``: all five without the key-phase embedding): how their tables
pair each run with the reference run of the same configuration and seed, and that their READMEs are
what their generators write from the committed records."""

import importlib.util
import shutil

from cipherlab.analysis import ablation
from cipherlab.base.config import RECIPE_KNOWLEDGE, RECIPES
from cipherbook.runs import RECIPE_FOLDERS
from cipherbook.viva import REPO_ROOT
from recorded import assert_readme_is_generated  # tests/ is on sys.path under pytest

RESULTS = REPO_ROOT / "results"


def _record(config: str, seed: int, random_lines: str, brown_lines: str) -> dict:
    def part(outcomes):
        return {"exact_by_line": outcomes, "exact_lines": outcomes.count("1"), "lines": len(outcomes)}
    return {"config": config, "seed": seed, "sets": {"random_letters": part(random_lines), "test_free": part(brown_lines)}}


def test_the_cost_table_pairs_each_seed_with_the_reference_run_of_that_seed():
    reference = {("c1", 0): _record("c1", 0, "1111", "11"), ("c1", 1): _record("c1", 1, "1111", "11"),
                 ("c2", 0): _record("c2", 0, "1111", "11")}
    without = {"phase_embedding": {("c1", 0): _record("c1", 0, "1100", "11"), ("c1", 1): _record("c1", 1, "1111", "10")}}
    table = ablation.recipe_cost_table(reference, without, sets=("random_letters", "test_free"))
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == 1  # C2 has no run without the part: no row
    assert "seed 0: 4 → 2 (p = 0.5)" in rows[0] and "seed 1: 4 → 4 (p = 1)" in rows[0]
    assert "seed 1: 2 → 1 (p = 1)" in rows[0]


def test_every_part_of_the_recipe_has_a_folder_and_a_value_it_takes_instead():
    assert set(ablation.RECIPE_OFF) == set(RECIPES["cipher"]) - {"substitution"} == set(RECIPE_KNOWLEDGE)
    assert all(RECIPES["cipher"][part] != changes[part] and set(changes) <= set(RECIPES["cipher"])
               for part, changes in ablation.RECIPE_OFF.items())
    assert list(RECIPE_FOLDERS) == list(ablation.RECIPE_OFF)  # the book's folder of each part, in the same order


def test_only_the_parts_that_ran_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv(ablation.RESULTS_ENV, str(tmp_path))
    assert ablation.load_recipe_runs(RECIPE_FOLDERS) == {}
    (tmp_path / "nophase").mkdir()
    record = next((RESULTS / "nophase").glob("nophase-c1-seed0.json"))
    shutil.copy(record, tmp_path / "nophase" / record.name)
    assert list(ablation.load_recipe_runs(RECIPE_FOLDERS)) == ["phase_embedding"]


def test_the_committed_runs_take_out_the_part_their_folder_names():
    for part, runs in ablation.load_recipe_runs(RECIPE_FOLDERS).items():
        changes = ablation.RECIPE_OFF[part]
        for key, record in runs.items():
            assert {p: record["hyperparameters"][p] for p in changes} == changes, (part, key)
            others = {p: v for p, v in RECIPES["cipher"].items() if p not in changes}
            assert {p: record["hyperparameters"][p] for p in others} == others, (part, key)
            assert record["curve"], (part, key)  # every run has its learning curve


def test_the_nophase_readme_is_generated(tmp_path, monkeypatch):
    assert_readme_is_generated(RESULTS / "nophase", tmp_path, monkeypatch)


def test_the_recipe_readmes_are_generated(tmp_path, monkeypatch):
    for folder in ("reference", "nophase", "recipe"):
        shutil.copytree(RESULTS / folder, tmp_path / folder, ignore=shutil.ignore_patterns("README.md", "*.safetensors"))
    monkeypatch.setenv(ablation.RESULTS_ENV, str(tmp_path))
    spec = importlib.util.spec_from_file_location("recipe_readme", RESULTS / "recipe" / "make_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    written = sorted(p.relative_to(tmp_path) for p in (tmp_path / "recipe").rglob("README.md"))
    assert written == sorted(p.relative_to(RESULTS) for p in (RESULTS / "recipe").rglob("README.md"))
    for path in written:
        assert (tmp_path / path).read_text(encoding="utf-8") == (RESULTS / path).read_text(encoding="utf-8"), path
