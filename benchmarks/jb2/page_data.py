"""What the Jupyter Book 2 spike put on each page, read from the page data it built
(_build_jb2/_build/site/content/*.json): the numbers in COMPARISON.md's content rows.

    python benchmarks/jb2/page_data.py [_build_jb2/_build/site/content]

This reads the build's page data, not a rendered page: whether the theme shows each thing as JB1 does
is what the browser tests decide, once a Jupyter Book 2 site can be built (COMPARISON.md).
"""

import json
import sys
from pathlib import Path

CONTENT = Path(sys.argv[1] if len(sys.argv) > 1 else "_build_jb2/_build/site/content")
PUBLIC = CONTENT.parent / "public"


def nodes(node):
    yield node
    for child in node.get("children", []):
        yield from nodes(child)


def html_outputs_with_scripts(page) -> list[str]:
    found = []
    for node in nodes(page["mdast"]):
        data = (node.get("jupyter_data") or {}).get("data") or {} if node["type"] == "output" else {}
        html = data.get("text/html") or {}
        # a large output is written beside the pages and referred to by its path
        html = html.get("content") or (PUBLIC / html["path"].lstrip("/")).read_text(encoding="utf-8") if html else ""
        if "<script" in html:
            kind = next((k for k in ("cipherlab-explorer", "cipherlab-player", "cipherlab-flashcards") if k in html),
                        "other")
            found.append(kind.removeprefix("cipherlab-"))
    return found


def main() -> None:
    print("| page (slug) | Colab link | folded answers (details) | folded solution cells | maths nodes "
          "| outputs with a script | widget state | notebook download |")
    print("|---|---|---|---|---|---|---|---|")
    for path in sorted(CONTENT.glob("*.json")):
        page = json.loads(path.read_text(encoding="utf-8"))
        all_nodes = list(nodes(page["mdast"]))
        colab = [n["url"] for n in all_nodes if n["type"] == "link" and "colab.research.google.com" in n.get("url", "")]
        details = sum(n["type"] == "details" for n in all_nodes)
        # a cell tagged hide-cell becomes a block whose visibility is "hide" (the tag itself is dropped)
        folded = sum(n["type"] == "block" and n.get("visibility") == "hide" for n in all_nodes)
        maths = sum(n["type"] in ("math", "inlineMath") for n in all_nodes)
        scripts = html_outputs_with_scripts(page)
        widgets = "yes" if page.get("widgets") else "no"
        download = ", ".join(e.get("url", "") for e in page["frontmatter"].get("exports", []) if e.get("format") == "ipynb")
        print(f"| {page['slug']} | {colab[0].split('/blob/')[1] if colab else 'none'} | {details} | {folded} | {maths} "
              f"| {', '.join(scripts) or 'none'} | {widgets} | {download or 'none'} |")


if __name__ == "__main__":
    main()
