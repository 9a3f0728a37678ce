"""The explorers' output bundle and the data behind them (book/cipherbook/explorers.py); no browser here
(tests/test_browser.py opens the built pages)."""

import base64
import json
import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from cipherbook import explorers  # noqa: E402
from cipherlab.models.positional import RotaryPositionalEmbedding  # noqa: E402

HEAD_DIM, HALF = 16, 8
VENDOR = Path(__file__).resolve().parents[1] / "_vendor"


def spec_rows(spec: dict) -> list[dict]:
    return spec["data"]["values"]


def params(spec: dict) -> dict:
    return {p["name"]: p for p in spec["params"]}


def random_maps(lengths=((32, 32), (33, 32))) -> dict:
    g = torch.Generator().manual_seed(0)
    return {("kind", i): torch.softmax(torch.randn(3, 2, lq, lk, generator=g), -1) for i, (lq, lk) in enumerate(lengths)}


def still():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    return fig


# --------------------------------------------------------------------------- the bundle


def test_the_bundle_holds_the_spec_the_html_and_a_png():
    spec = {"mark": "point", "data": {"values": [{"a": 1, "note": "</script><b>"}]}}
    bundle = explorers.Explorer(spec, still(), "a test")._repr_mimebundle_()
    # no Vega-Lite mimetype: myst-nb would warn that it cannot show it, and the build uses -W
    assert set(bundle) == {"text/html", "image/png", "text/plain"}
    x = explorers.Explorer(spec, still())
    assert x.spec["$schema"].endswith("/vega-lite/v5.json")
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    html = bundle["text/html"]
    # the still picture is inside the HTML too: it stays where scripts do not run
    assert 'class="cx-still"' in html and bundle["image/png"] in html
    # the spec in the page parses back to the spec, and cannot end its <script> early
    payload = re.search(r'<script type="application/json" class="cx-spec">(.*?)</script>', html, re.S).group(1)
    assert json.loads(payload) == x.spec and "</script><b>" not in payload


def test_the_bundle_closes_the_figure_and_is_deterministic():
    spec = {"mark": "point", "data": {"values": [{"a": 1}]}}
    fig = still()
    one, two = explorers.Explorer(spec, fig), explorers.Explorer(spec, still())
    assert not plt.fignum_exists(fig.number)
    assert one.element_id == two.element_id and one.element_id in one.html()


def test_the_bundle_refuses_what_is_not_a_spec():
    with pytest.raises(ValueError, match="Vega-Lite spec"):
        explorers.Explorer({"data": {"values": []}}, still())


def test_the_html_uses_the_books_scripts_and_names_the_vendored_versions():
    html = explorers.Explorer({"mark": "point"}, still()).html()
    assert "window.vegaEmbed" in html and 'renderer: "svg"' in html
    for local, published in explorers.SCRIPTS.values():
        name, version = published.split("/")[0].split("@")
        text = (VENDOR / local).read_text(encoding="utf-8")
        if name != "vega-embed":  # vega-embed's build does not print its version near the top
            assert version in text, (local, version)


def test_a_slider_needs_evenly_spaced_whole_numbers():
    assert explorers._param("x", 5, range(5, 100, 5))["bind"] == {
        "input": "range", "min": 5, "max": 95, "step": 5, "name": "x "}
    assert explorers._param("kind", "a", ["a", "b"])["bind"]["input"] == "select"
    with pytest.raises(ValueError, match="evenly spaced"):
        explorers._param("x", 1, [1, 2, 4])


def test_thousandths_round_to_whole_thousandths():
    assert explorers.thousandths(torch.tensor([[0.0, 0.1234], [0.9996, 1.0]])) == [0, 123, 1000, 1000]


# --------------------------------------------------------------------------- attention maps (chapters 2, 9)


def test_heatmap_data_are_every_map_and_rows_still_sum_to_one():
    maps = random_maps()
    spec = explorers.heatmap_explorer(maps, ("kind", "layer"), ("kind", 1, 1, 2)).spec
    rows = spec_rows(spec)
    assert len(rows) == len(maps) * 2 * 3  # every module, head and example
    for row in rows:
        w = maps[(row["kind"], row["layer"])][row["example"], row["head"]]
        v = np.array(row["v"]).reshape(-1, row["nk"]) / 1000
        assert v.shape == tuple(w.shape)
        assert np.abs(v - w.numpy()).max() <= 0.0005 + 1e-9
        assert np.allclose(v.sum(1), 1, atol=row["nk"] * 0.0005)  # each query row still sums to 1
    p = params(spec)
    assert p["p_kind"]["value"] == "kind" and p["p_layer"]["value"] == 1
    assert p["p_head"]["bind"]["max"] == 1 and p["p_example"]["bind"]["max"] == 2


def test_heatmap_filter_names_every_control():
    spec = explorers.heatmap_explorer(random_maps(), ("kind", "layer"), ("kind", 0, 0, 0)).spec
    condition = spec["transform"][0]["filter"]
    for name in ("kind", "layer", "head", "example"):
        assert f'datum["{name}"] == p_{name}' in condition


def test_heatmap_refuses_a_default_that_is_not_a_map():
    with pytest.raises(KeyError, match="not one of the maps' keys"):
        explorers.heatmap_explorer(random_maps(), ("kind", "layer"), ("kind", 5, 0, 0))


def test_committed_models_give_the_chapter_9_explorer_under_two_megabytes():
    from cipherbook.runs import load_committed_model
    from cipherlab.analysis import attention_maps

    torch.set_num_threads(1)
    model, codec, config = load_committed_model("c2")  # the reference C2
    view = attention_maps.attention_view(model, codec, attention_maps.example_chunks(config, 4), "C2")
    modules = {(f"C2: {kind}, layer {layer}",): w for (kind, layer), w in view.maps.items()}
    x = explorers.heatmap_explorer(modules, ("module",), ("C2: cross, layer 1", 0, 0), texts=view.texts, vmax=None)
    assert params(x.spec)["p_texts"]["value"] == view.texts
    assert len(spec_rows(x.spec)) == len(modules) * view.n_heads * 4
    for row in spec_rows(x.spec):
        v = np.array(row["v"]).reshape(-1, row["nk"]) / 1000  # the page's weights, to the thousandth
        assert np.allclose(v, modules[(row["module"],)][row["example"], row["head"]].numpy(), atol=0.0005 + 1e-9)
        # a row's weight on characters: all of it, less what the end-of-source token (no character) took
        assert (v.sum(1) <= 1.02).all()
    assert len(x.html()) < 2_000_000  # both models together stay under a few MB


# --------------------------------------------------------------------------- RoPE (the positions chapter)


def rope_rows():
    rope = RotaryPositionalEmbedding(HEAD_DIM, max_len=64)

    def rotated_pair(pair, i, position):  # the positions chapter's function
        x = torch.zeros(1, 1, 1, HEAD_DIM)
        x[..., i], x[..., i + HALF] = pair
        y = rope.rotate(x, offset=position)[0, 0, 0]
        return y[i].item(), y[i + HALF].item()

    x = explorers.rope_explorer(rotated_pair, (1.0, 0.3), (0.6, 0.8), HALF, 64, draw=lambda ax, m, n, i: None)
    return x.spec, {(r["pair"], r["pos"]): r for r in spec_rows(x.spec)}


def test_rope_data_are_rotations_that_keep_the_length():
    spec, rows = rope_rows()
    assert len(rows) == HALF * 64
    for r in rows.values():
        assert np.hypot(r["qx"], r["qy"]) == pytest.approx(np.hypot(1.0, 0.3), abs=1e-3)
        assert np.hypot(r["kx"], r["ky"]) == pytest.approx(1.0, abs=1e-3)
    assert (rows[(0, 0)]["qx"], rows[(0, 0)]["qy"]) == pytest.approx((1.0, 0.3), abs=1e-4)  # position 0: no turn


def test_rope_data_show_that_shifting_both_positions_keeps_the_score():
    spec, rows = rope_rows()

    def score(i, m, n):
        q, k = rows[(i, m)], rows[(i, n)]
        return q["qx"] * k["kx"] + q["qy"] * k["ky"]

    p = params(spec)
    top, shift = p["p_m"]["bind"]["max"], p["p_shift"]["bind"]["max"]
    assert top + shift == 63  # the sliders never leave the precomputed positions
    for i in range(HALF):
        for m, n in [(3, 7), (0, 40), (50, 2)]:
            base = score(i, m, n)
            assert all(abs(score(i, m + s, n + s) - base) < 2e-3 for s in range(shift + 1))
    assert abs(score(1, 3, 7) - score(1, 3, 20)) > 0.05  # while changing the offset changes it


# --------------------------------------------------------------------------- entropy patches (the BLT chapter)


class _Entropy:
    """A stand-in for ByteEntropyModel: the curve is the byte values scaled, the threshold linear."""

    def entropy_curve(self, values):
        return np.asarray(values, dtype=float) / 32

    def threshold_at(self, pct):
        return 8 * pct / 100

    def patch_boundaries(self, values, threshold, max_patch):
        from cipherlab.models.blt_patching import ByteEntropyModel

        return ByteEntropyModel.patch_boundaries(self, values, threshold, max_patch)


def test_entropy_data_mark_the_boundaries_of_every_percentile():
    values = np.random.default_rng(0).integers(0, 256, 60)
    text = "".join(chr(97 + v % 26) for v in values)
    model = _Entropy()
    spec = explorers.entropy_explorer(model, values, text, max_patch=6, n=48).spec
    rows = spec_rows(spec)
    assert {r["pct"] for r in rows} == set(range(5, 100, 5)) and len(rows) == 19 * 48
    counts, capped = [], []
    for pct in range(5, 100, 5):
        starts = model.patch_boundaries(values, model.threshold_at(pct), 6)
        mine = [r for r in rows if r["pct"] == pct]
        assert [r["i"] for r in mine if r["start"]] == [s for s in starts if s < 48]
        counts.append(sum(r["start"] for r in mine))
        by_entropy = sum(r["start"] and (r["i"] == 0 or r["h"] > r["thr"]) for r in mine)
        capped.append(1 - by_entropy / counts[-1])
        patches = params(spec)["p_patches"]["value"][str(pct)]
        assert patches.replace(" | ", "") == text[:48]
    # the BLT chapter: "raise it and fewer [patches start], and the cap makes a growing share of those that remain"
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    assert capped == sorted(capped) and capped[0] < capped[-1]
    with pytest.raises(ValueError, match="not one of the slider's"):
        explorers.entropy_explorer(model, values, text, max_patch=6, default=72)


def test_the_book_serves_the_vendored_scripts_before_require_js():
    import yaml

    sphinx = yaml.safe_load((VENDOR.parent / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]
    served = {name: attrs for name, attrs in sphinx["html_js_files"]}
    assert set(served) == {local for local, _ in explorers.SCRIPTS.values()}
    for name, attrs in served.items():
        assert (VENDOR / name).is_file(), name
        # require.js comes at myst-nb's default priority, 500: before it, the UMD builds set globals
        assert attrs["priority"] < 500, name
    assert "priority" not in sphinx["nb_ipywidgets_js"]["require.js"]
