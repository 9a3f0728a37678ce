#!/usr/bin/env bash
# The release step, one command (README: "Publishing"). The chapters' setup cells and Colab buttons
# clone `repository.url` at `repository.branch` (_config.yml); this makes that tag exist there.
#   tools/release.sh                  check, tag v<version> (pyproject.toml) at HEAD, push the tag, check it is there
#   tools/release.sh --check          only check that the tag is on the remote (before publishing a build)
#   tools/release.sh --check --url U  the same against another copy (a mirror, a fork)
# REMOTE (default: origin) is where the tag is pushed; PYTHON (default: .venv/bin/python, else python3) is the
# Python with the book's tools installed. Exits non-zero, with one line saying why, when
# the tag is missing, or the cloned tag holds another version: then publish nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export GIT_TERMINAL_PROMPT=0
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || command -v "$PY" > /dev/null || PY=python3
REMOTE=${REMOTE:-origin}
check_only=0 url=""
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check_only=1 ;;
    --url) url=$2; shift ;;
    *) echo "usage: tools/release.sh [--check] [--url URL]" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "release: $*" >&2; exit 1; }

read -r config_url tag version < <("$PY" - <<'PY'
import re, tomllib, yaml
from pathlib import Path
repo = yaml.safe_load(Path("_config.yml").read_text(encoding="utf-8"))["repository"]
version = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
print(repo["url"], repo.get("branch", "main"), version)
PY
)
url=${url:-$config_url}
[ "$tag" = "v$version" ] || die "_config.yml names tag $tag but pyproject.toml's version is $version: set repository.branch to v$version, run python -m cipherbook.viva sync, commit"
"$PY" - <<'PY' || die "the chapters' setup cells do not clone $tag: run .venv/bin/python -m cipherbook.viva sync and commit"
import sys, nbformat
from cipherbook.viva import book_notebooks, setup_cell_source
stale = [p.name for p in book_notebooks() if nbformat.read(p, as_version=4).cells[0].source != setup_cell_source()]
sys.exit(f"stale setup cells: {', '.join(stale)}" if stale else 0)
PY

if [ "$check_only" = 0 ]; then
  git diff --quiet HEAD -- || die "uncommitted changes: commit them first (the tag marks HEAD)"
  if git rev-parse -q --verify "refs/tags/$tag" > /dev/null; then
    [ "$(git rev-parse "$tag^{commit}")" = "$(git rev-parse HEAD)" ] || die "tag $tag exists and is not HEAD: bump the version for a new release"
  else
    git tag -a "$tag" -m "cipherlab $version"
  fi
  git push "$REMOTE" "refs/tags/$tag"
fi

# The check a student's setup cell depends on: the tag is at the URL, and a clone of it is this version.
git ls-remote --exit-code --tags "$url" "refs/tags/$tag" > /dev/null 2>&1 \
  || die "tag $tag is not at $url: push it (tools/release.sh) before publishing the book; until then every setup cell's clone fails"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git clone -q --depth 1 --branch "$tag" "$url" "$scratch/clone" 2> "$scratch/err" \
  || die "git clone --branch $tag $url failed: $(tail -n 1 "$scratch/err")"
cloned=$("$PY" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$scratch/clone/pyproject.toml" 2> /dev/null) \
  || die "the clone of $tag from $url has no readable pyproject.toml"
[ "$cloned" = "$version" ] || die "$tag at $url holds version $cloned, not $version"
echo "release: $tag is at $url and a clone of it is cipherlab $version: the setup cells will install it; publish the book."
