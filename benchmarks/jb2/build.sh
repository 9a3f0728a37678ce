#!/usr/bin/env bash
# The Jupyter Book 2 spike (benchmarks/jb2/COMPARISON.md), rebuilt from the committed config: `make jb2-spike`.
# Jupyter Book 2 goes into its own venv, outside the repository (JB2_VENV), never into .venv; the
# build runs in _build_jb2/ (git-ignored) from a copy of benchmarks/jb2/myst.yml, from the chapters' stored
# outputs (no execution), and leaves the site in _build_jb2/_build/html.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${JB2_VENV:-$HOME/.cache/cipherlab-jb2/venv}
SPEC=${JB2_SPEC:-jupyter-book==2.1.7}  # the version COMPARISON.md measured
PYTHON=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet "$SPEC"
echo "Jupyter Book $("$VENV/bin/jupyter-book" --version) from $VENV"

rm -rf _build_jb2
mkdir -p _build_jb2
cp benchmarks/jb2/myst.yml _build_jb2/myst.yml  # its paths (../book, ../benchmarks/jb2) hold from any folder beside book/
cd _build_jb2
if ! "$VENV/bin/jupyter-book" build --html; then
  # --html asks for the site theme (book-theme, downloaded at build time) before it reads a page;
  # --site reads every page first, so the page data is there for benchmarks/jb2/page_data.py even then.
  "$VENV/bin/jupyter-book" build --site > /dev/null 2>&1 || true
  echo "The Jupyter Book 2 site was not built (its error is above). The page data is in" \
       "$PWD/_build/site/content: python benchmarks/jb2/page_data.py (COMPARISON.md)." >&2
  exit 1
fi
echo "The Jupyter Book 2 site is at $PWD/_build/html. Browser tests against it:"
echo "  CIPHERLAB_SITE=$PWD/_build/html .venv/bin/python -m pytest tests/test_browser.py -p no:nbval -o addopts=''"
