"""Explorers that move wherever the book is read: Vega-Lite charts with bound controls.

One class makes the output, :class:`Explorer`: a Vega-Lite spec and a matplotlib figure in, one
output bundle out, which shows

- with a kernel (JupyterLab, Colab): the HTML, which fetches vega from its CDN when the frontend
  has no copy (offline, the still picture stays);
- on the built book, with no kernel and no network: the HTML, drawn by the vega scripts the book
  serves itself (``_vendor/vega/``, loaded on every page through ``_config.yml``);
- where nothing runs (GitHub's viewer, a PDF): the figure, as a PNG, at the default setting.

The bundle holds no Vega-Lite mimetype: JupyterLab ranks HTML above it anyway, and the book's
build would warn of a mimetype it cannot show (``-W`` makes that an error); ``Explorer.spec`` is
the spec, for a frontend that wants it. The data are precomputed over every setting of the
controls, by the chapter's own code, and written into the spec; the browser only filters them.
The chapters call the builders below:
:func:`heatmap_explorer` (the attention and results chapters' attention maps), :func:`rope_explorer`
(the positions chapter) and :func:`entropy_explorer` (the BLT chapter).

"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Callable, Sequence

__all__ = ["SCRIPTS", "Explorer", "entropy_explorer", "heatmap_explorer",
           "rope_explorer", "thousandths"]

SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"  # a name: vega-embed reads the version, fetches nothing
# The scripts, as vendored under _vendor/vega/ (see _vendor/README.md) and, for a notebook frontend
# that has no copy, as published (the same versions).
SCRIPTS = {"vega": ("vega/vega.min.js", "vega@5.33.1/build/vega.min.js"),
           "vega-lite": ("vega/vega-lite.min.js", "vega-lite@5.23.0/build/vega-lite.min.js"),
           "vega-embed": ("vega/vega-embed.min.js", "vega-embed@6.29.0/build/vega-embed.min.js")}
CDN = "https://cdn.jsdelivr.net/npm/"

_SCRIPT = """(function () {
  var root = document.getElementById(ROOT_ID);
  var spec = JSON.parse(root.querySelector("script.cx-spec").textContent);
  function draw(embed) {
    var target = document.createElement("div");
    root.appendChild(target);
    embed(target, spec, {actions: false, renderer: "svg"}).then(function () {
      root.querySelector(".cx-still").hidden = true;
      root.setAttribute("data-ready", "true");
    });
  }
  if (window.vegaEmbed) { draw(window.vegaEmbed); return; }
  // A notebook frontend without the book's scripts: fetch them; offline, the still picture stays.
  var urls = URLS;
  if (typeof window.require === "function" && window.require.config) {
    window.require.config({paths: {"vega": urls[0], "vega-lite": urls[1], "vega-embed": urls[2]}});
    window.require(["vega-embed"], draw, function () {});
    return;
  }
  (function next(i) {
    if (i === urls.length) { draw(window.vegaEmbed); return; }
    var script = document.createElement("script");
    script.src = urls[i] + ".js";
    script.onload = function () { next(i + 1); };
    document.head.appendChild(script);
  })(0);
})();"""


def _json_for_script(value) -> str:
    """JSON that is safe inside <script>: "</" would end the element early."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")


class Explorer:
    """A Vega-Lite chart with a still picture behind it; display it (a cell's last expression).

    ``spec`` is a Vega-Lite v5 spec (a dict; ``$schema`` is added), ``figure`` a matplotlib Figure
    of the default setting, turned into a PNG at once and closed.
    """

    def __init__(self, spec: dict, figure, title: str = ""):
        if not isinstance(spec, dict) or not ({"mark", "layer", "hconcat", "vconcat", "concat"} & spec.keys()):
            raise ValueError(f"explorer needs a Vega-Lite spec (a dict with a mark or a layer), got {type(spec).__name__} "
                             f"with keys {sorted(spec) if isinstance(spec, dict) else '-'}")
        import matplotlib.pyplot as plt

        self.spec = {"$schema": SCHEMA, **spec}
        self.title = title or str(spec.get("description", "explorer"))
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=90)
        plt.close(figure)
        self.png = buffer.getvalue()
        digest = hashlib.sha1(json.dumps(self.spec, sort_keys=True).encode()).hexdigest()[:10]
        self.element_id = f"cipherlab-explorer-{digest}"

    def html(self) -> str:
        """The HTML fragment: the still picture, the spec as JSON and the script that replaces one by the other."""
        png = base64.b64encode(self.png).decode("ascii")
        urls = [CDN + cdn.removesuffix(".js") for _, cdn in SCRIPTS.values()]
        script = _SCRIPT.replace("ROOT_ID", json.dumps(self.element_id)).replace("URLS", json.dumps(urls))
        return (f'<div class="cipherlab-explorer" id="{self.element_id}">'
                f'<img class="cx-still" alt="{self.title} (the default setting)" src="data:image/png;base64,{png}">'
                f'<script type="application/json" class="cx-spec">{_json_for_script(self.spec)}</script>'
                f"<script>{script}</script></div>")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self.html(),
                "image/png": base64.b64encode(self.png).decode("ascii"),
                "text/plain": f"<{self.title}: an explorer; a browser shows its controls>"}


# --------------------------------------------------------------------------- controls and data


def thousandths(values) -> list[int]:
    """Weights in 0..1 (a tensor or array, any shape) as a flat list of whole thousandths: small JSON."""
    import numpy as np

    return np.rint(np.asarray(values, dtype=np.float64).reshape(-1) * 1000).astype(int).tolist()


def _param(name: str, value, options: Sequence, label: str = "") -> dict:
    """A control bound to the page, named ``p_<name>``: a menu for names, a slider for evenly spaced
    whole numbers."""
    options, label = list(options), f"{label or name} "
    if all(isinstance(o, int) for o in options):
        step = options[1] - options[0] if len(options) > 1 else 1
        if options != list(range(options[0], options[-1] + 1, step)):
            raise ValueError(f"slider {name}: {options} are not evenly spaced whole numbers")
        return {"name": f"p_{name}", "value": value,
                "bind": {"input": "range", "min": options[0], "max": options[-1], "step": step, "name": label}}
    return {"name": f"p_{name}", "value": value, "bind": {"input": "select", "options": options, "name": label}}


def _still_heatmap(weights, title: str, vmax: float | None):
    import matplotlib.pyplot as plt
    import numpy as np

    weights = np.asarray(weights.detach().float().cpu() if hasattr(weights, "detach") else weights)
    fig, ax = plt.subplots(figsize=(4.2, 4), layout="constrained")
    ax.imshow(weights, cmap="viridis", vmin=0, vmax=float(weights.max()) if vmax is None else vmax)
    ax.set(title=title, xlabel="key position", ylabel="query position")
    ax.title.set_fontsize(10)
    return fig


def heatmap_explorer(maps: dict, dims: Sequence[str], default: tuple, *, texts: Sequence[str] | None = None,
                     vmax: float | None = 1.0, figure=None, size: int = 320) -> Explorer:
    """Attention maps, one at a time: menus or sliders for ``dims`` (the parts of the keys of ``maps``),
    ``head`` and ``example``.

    ``maps[key]`` is (B, H, Lq, Lk) (capture_attention's or an AttentionView's maps; the sizes may
    differ between keys), ``default`` the key, head and example shown first; ``texts`` label the
    query axis with each example's characters; colours run from 0 to ``vmax`` (None: the largest
    weight shown). ``figure`` is the still picture (default: the default map, drawn like the attention chapter's).
    """
    *key, head, example = default
    if tuple(key) not in maps:
        raise KeyError(f"default {tuple(key)} is not one of the maps' keys {list(maps)}")
    if any(len(k) != len(dims) for k in maps):
        raise ValueError(f"the maps' keys {list(maps)} do not each have the {len(dims)} parts {tuple(dims)}")
    n_heads, n_examples = ({int(w.size(dim)) for w in maps.values()} for dim in (1, 0))
    if len(n_heads) != 1 or any(w.dim() != 4 for w in maps.values()):
        raise ValueError(f"heatmap_explorer needs (B, H, Lq, Lk) maps with one number of heads, got shapes "
                         f"{sorted({tuple(w.shape) for w in maps.values()})}")
    n_heads, n_examples = n_heads.pop(), min(n_examples)
    rows = [dict(zip(dims, k), head=h, example=b, nk=int(w.size(-1)), v=thousandths(w[b, h]))
            for k, w in maps.items() for h in range(n_heads) for b in range(n_examples)]
    params = [_param(d, v, list(dict.fromkeys(k[i] for k in maps))) for i, (d, v) in enumerate(zip(dims, key))]
    params += [_param("head", head, range(n_heads)), _param("example", example, range(n_examples))]
    chosen = [*dims, "head", "example"]
    title = " + ', ' + ".join(f"'{d} ' + p_{d}" if d in ("layer", "head", "example") else f"p_{d}" for d in chosen)
    y_axis = {"title": "query position"}
    if texts is not None:
        params.append({"name": "p_texts", "value": list(texts)})
        y_axis = {"title": "query character", "labelExpr": "p_texts[p_example][datum.value]", "labelFont": "monospace"}
    color = {"scheme": "viridis"} | ({"domain": [0, vmax]} if vmax is not None else {})
    spec = {
        "description": f"attention maps: {', '.join(chosen)}",
        "title": {"text": {"expr": title}, "fontSize": 12},
        "width": size, "height": size,
        "data": {"values": rows},
        "params": params,
        "transform": [
            {"filter": " && ".join(f"datum[{json.dumps(d)}] == p_{d}" for d in chosen)},
            {"flatten": ["v"]},
            {"window": [{"op": "row_number", "as": "cell"}]},  # flatten keeps the order: cell = q * Lk + k + 1
            {"calculate": "floor((datum.cell - 1) / datum.nk)", "as": "query"},
            {"calculate": "(datum.cell - 1) % datum.nk", "as": "key"},
            {"calculate": "datum.v / 1000", "as": "weight"},
        ],
        "mark": "rect",
        "encoding": {
            "x": {"field": "key", "type": "ordinal", "title": "key position", "axis": {"labelAngle": 0, "labelFontSize": 7}},
            "y": {"field": "query", "type": "ordinal", "axis": y_axis | {"labelFontSize": 7}},
            "color": {"field": "weight", "type": "quantitative", "scale": color},
            "tooltip": [{"field": "query"}, {"field": "key"}, {"field": "weight", "format": ".3f"}],
        },
    }
    if figure is None:
        figure = _still_heatmap(maps[tuple(key)][example, head], ", ".join(map(str, default)), vmax)
    return Explorer(spec, figure, "attention maps")


def rope_explorer(rotated_pair: Callable, q_pair: tuple, k_pair: tuple, n_pairs: int, max_len: int,
                  draw: Callable, default: tuple = (3, 7, 1), shift_max: int = 7) -> Explorer:
    """The positions chapter's RoPE explorer: query position m, key position n, frequency pair i and a shift s
    added to both; arrows of the rotated pairs at m + s and n + s, and the score there and at (m, n).

    ``rotated_pair(pair, i, position)`` is the chapter's function (cipherlab's RoPE on one pair),
    evaluated here at every pair and position 0..max_len - 1; ``draw(ax, m, n, i)`` draws the still.
    """
    import matplotlib.pyplot as plt

    rows = []
    for i in range(n_pairs):
        for p in range(max_len):
            (qx, qy), (kx, ky) = rotated_pair(q_pair, i, p), rotated_pair(k_pair, i, p)
            rows.append({"pair": i, "pos": p, "qx": round(qx, 4), "qy": round(qy, 4), "kx": round(kx, 4), "ky": round(ky, 4)})
    m, n, i = default
    top = max_len - 1 - shift_max
    params = [_param("m", m, range(top + 1)), _param("n", n, range(top + 1)), _param("pair", i, range(n_pairs)),
              _param("shift", 0, range(shift_max + 1))]
    at = {"a": "p_m + p_shift", "b": "p_n + p_shift", "c": "p_m", "d": "p_n"}
    picks = [{"calculate": f"datum.pos == {where} ? datum.{side}{axis} : 0", "as": f"{name}{axis}"}
             for name, where in at.items() for side in ["q" if name in "ac" else "k"] for axis in "xy"]
    score = [*picks, {"aggregate": [{"op": "sum", "field": f"{name}{axis}", "as": f"{name}{axis}"}
                                   for name in at for axis in "xy"]},
             {"calculate": "datum.ax * datum.bx + datum.ay * datum.by", "as": "now"},
             {"calculate": "datum.cx * datum.dx + datum.cy * datum.dy", "as": "base"}]
    scale = {"domain": [-1.3, 1.3]}
    x = {"type": "quantitative", "scale": scale, "axis": None}
    y = {"type": "quantitative", "scale": scale, "axis": None}

    def arrow(side: str, where: str, colour: str) -> list[dict]:
        shown = {"filter": f"datum.pair == p_pair && datum.pos == {where}"}
        tip = {"x": x | {"field": f"{side}x"}, "y": y | {"field": f"{side}y"}}
        enc = tip | {"x2": {"datum": 0}, "y2": {"datum": 0}}  # from the tip to the origin
        return [{"transform": [shown], "mark": {"type": "rule", "strokeWidth": 3, "color": colour}, "encoding": enc},
                {"transform": [shown], "mark": {"type": "point", "filled": True, "size": 90, "color": colour},
                 "encoding": tip}]

    def label(y_at: float, text: str) -> dict:
        return {"transform": [{"filter": "datum.pair == p_pair"}, *score, {"calculate": text, "as": "label"}],
                "mark": {"type": "text", "fontSize": 12}, "encoding": {"x": x | {"datum": 0}, "y": y | {"datum": y_at},
                                                                        "text": {"field": "label"}}}

    circle = {"data": {"sequence": {"start": 0, "stop": 361, "step": 4, "as": "deg"}},
              "transform": [{"calculate": "1.1 * cos(datum.deg * PI / 180)", "as": "cx"},
                            {"calculate": "1.1 * sin(datum.deg * PI / 180)", "as": "cy"}],
              "mark": {"type": "line", "color": "#d9d9d9"},
              "encoding": {"x": x | {"field": "cx"}, "y": y | {"field": "cy"}, "order": {"field": "deg"}}}
    spec = {
        "description": "RoPE: one frequency pair of a query and a key, rotated",
        "width": 340, "height": 340, "data": {"values": rows}, "params": params,
        "layer": [circle, *arrow("q", at["a"], "#1f77b4"), *arrow("k", at["b"], "#ff7f0e"),
                  label(1.22, "'m=' + (p_m + p_shift) + ', n=' + (p_n + p_shift) + ', pair ' + p_pair"
                              " + ': score ' + format(datum.now, '+.3f')"),
                  label(-1.22, "'without the shift, (m, n) = (' + p_m + ', ' + p_n + '): score '"
                               " + format(datum.base, '+.3f')")],
    }
    fig, ax = plt.subplots(figsize=(3.4, 3.4))
    draw(ax, m, n, i)
    return Explorer(spec, fig, "RoPE explorer")


def entropy_explorer(entropy, values, text: str, max_patch: int, n: int = 48,
                     percentiles: Sequence[int] = range(5, 100, 5), default: int = 75) -> Explorer:
    """The BLT chapter's entropy curve over the first ``n`` bytes of one line, the threshold percentile on a
    slider: bars that start a patch are orange, the dashed line is the threshold.

    ``entropy`` is the chapter's fitted ByteEntropyModel, ``values`` the line's cipher bytes and
    ``text`` its plaintext (the bar labels); boundaries come from ``entropy.patch_boundaries``.
    """
    import matplotlib.pyplot as plt

    if default not in percentiles:
        raise ValueError(f"default percentile {default} is not one of the slider's {list(percentiles)}")
    curve = entropy.entropy_curve(values)[:n]
    rows, patches = [], {}
    for pct in percentiles:
        threshold = entropy.threshold_at(pct)
        starts = entropy.patch_boundaries(values, threshold, max_patch)
        shown = [s for s in starts if s < n]
        patches[pct] = " | ".join(text[a:b] for a, b in zip(shown, [*shown[1:], n]))
        rows += [{"pct": pct, "i": i, "h": round(float(curve[i]), 3), "thr": round(threshold, 3),
                  "start": i in starts} for i in range(n)]
    chars = [c if c != " " else "␣" for c in text[:n]]
    x = {"type": "quantitative", "scale": {"domain": [-0.5, n - 0.5]}, "title": None,
         "axis": {"values": list(range(n)), "labelExpr": "p_chars[datum.value]", "labelFontSize": 9, "grid": False}}
    this = {"filter": "datum.pct == p_pct"}
    spec = {
        "description": "entropy curve and patch boundaries by threshold percentile",
        "title": {"text": {"expr": "'threshold: the ' + p_pct + 'th percentile; ' + p_patches[p_pct]"},
                  "fontSize": 11, "font": "monospace"},
        "width": 760, "height": 260, "data": {"values": rows},
        "params": [_param("pct", default, percentiles, "threshold percentile"),
                   {"name": "p_chars", "value": chars},
                   {"name": "p_patches", "value": {str(k): v for k, v in patches.items()}}],
        "layer": [
            {"transform": [this, {"calculate": "datum.i - 0.4", "as": "x0"}, {"calculate": "datum.i + 0.4", "as": "x1"}],
             "mark": "rect",
             "encoding": {"x": x | {"field": "x0"}, "x2": {"field": "x1"}, "y": {"field": "h", "type": "quantitative"},
                          "y2": {"datum": 0},
                          "color": {"field": "start", "type": "nominal", "title": "starts a patch",
                                    "scale": {"domain": [True, False], "range": ["#ff7f0e", "#1f77b4"]}},
                          "tooltip": [{"field": "i", "title": "byte"}, {"field": "h", "title": "bits"}]}},
            {"transform": [this, {"filter": "datum.start && datum.i > 0"}, {"calculate": "datum.i - 0.5", "as": "edge"}],
             "mark": {"type": "rule", "color": "#888888", "strokeWidth": 0.8}, "encoding": {"x": x | {"field": "edge"}}},
            {"transform": [this, {"filter": "datum.i == 0"}],
             "mark": {"type": "rule", "color": "black", "strokeDash": [5, 3]},
             "encoding": {"y": {"field": "thr", "type": "quantitative", "scale": {"domain": [0, 8]}, "title": "bits"}}},
        ],
    }
    fig, ax = plt.subplots(figsize=(10, 3.2), layout="constrained")
    default_rows = [r for r in rows if r["pct"] == default]
    ax.bar(range(n), curve, color=["tab:orange" if r["start"] else "tab:blue" for r in default_rows])
    ax.axhline(default_rows[0]["thr"], color="black", ls="--", lw=1)
    ax.set_xticks(range(n), chars, fontsize=9)
    ax.set(xlim=(-0.5, n - 0.5), ylim=(0, 8), ylabel="bits", title=f"threshold: the {default}th percentile")
    return Explorer(spec, fig, "entropy explorer")
