"""The viva: the question bank and the tools that put it into the book, the drill and the flashcards.

Half of the course mark is an oral exam, the viva. Its questions live in ONE place,
``book/cipherbook/viva/bank/<chapter>.yml``; this package turns that source into the last cells of each
chapter notebook, so the book and the bank never drift apart. What it holds:

- the bank (``cipherbook.viva.answers``, re-exported here): ``load_bank()`` / ``questions(chapter)``
  read and validate the YAML files.
- the facts: every number an answer or a chapter's prose quotes is computed, never typed by hand.
  ``cipherbook.viva.facts`` is the registry, ``FACTS[chapter] = {key: zero-argument callable}``,
  whose callables run the chapter's experiments (``book/cipherbook/experiments/<chapter>.py``, the
  functions the chapter's cells call and print). An answer cites a fact as ``{fact}`key``` or
  with a format, ``{fact}`key:.3f```, and ``fill_facts(text, chapter)`` puts the numbers in; the
  prose quotes one as ``<span data-fact="key:.3f">0.123</span>``, plain HTML, so the number shows
  in Colab, JupyterLab and on GitHub as well as on the site. The registry is imported only when
  facts are computed: ``import cipherbook.viva`` does not import torch.
- sync: ``setup_cell_source()``, ``viva_cells(chapter)`` and ``sync_notebook(path)`` write the
  generated cells and refill the numbers in the prose; run them as ``python -m cipherbook.viva sync``
  (``check`` exits 1 when a notebook differs from what sync would write: ``notebook_in_sync``).
- ``show_source(obj)`` displays the real source of a cipherlab object in a notebook.
- the drill (``python -m cipherbook.viva drill``, ``__main__``) asks the questions in a terminal.
- the flashcards (``cipherbook.viva.flashcards``): the same questions as cards, in a notebook
  or as one HTML fragment for the built book.
- outputs (``cipherbook.viva.outputs``, ``python -m cipherbook.viva outputs``) runs each chapter in a
  fresh kernel and stores its outputs; view (``cipherbook.viva.view``) renders a notebook, outputs
  included, as Colab and GitHub show it.
- ``myst_markup(text)`` lists what in a piece of markdown only MyST would render (roles,
  directive fences): nothing of the kind may reach a notebook, because Colab and Jupyter
  show it raw.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import yaml

# the bank and its facts, re-exported: ``from cipherbook.viva import load_bank`` keeps working
from cipherbook.viva.answers import (BANK_DIR, FACT_ROLE, FACT_SPAN, REQUIRED_KEYS, ChapterBank, Question,  # noqa: F401
                                    cited_facts, compute_facts, fill_facts, format_fact, load_bank, load_chapter,
                                    load_facts, prose_facts, questions, refill_prose, shown_question)

REPO_ROOT = Path(__file__).resolve().parents[3]

LEAD_WORDS = 50  # a lead is said in about 20 seconds
ANSWER_WORDS_MEDIAN = 100  # lead + answer, maths, code and tables not counted

# Marks every cell that ``sync`` writes, so it can find and replace them.
GENERATED_KEY = "cipherlab_generated"
VIVA_HEADING = "## Viva questions"

# What only MyST renders: a role {name}`...` and a directive fence ```{name} or :::{name}
MYST_ROLE = re.compile(r"\{[A-Za-z][\w:.+-]*\}`")
MYST_NAME_AT_END = re.compile(r"\{[A-Za-z][\w:.+-]*\}$")  # a text token just before a code span
MYST_COLON_FENCE = re.compile(r"\s*:{3,}\s*\{")


def myst_markup(markdown: str) -> list[str]:
    """What in ``markdown`` only MyST renders: roles and directive fences outside code.

    Colab, JupyterLab and GitHub render CommonMark (with HTML); there a role or a directive
    shows as raw text. Code spans and code blocks are skipped, so a chapter may still show
    such syntax as an example.
    """
    from markdown_it import MarkdownIt

    found = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type == "fence" and token.info.strip().startswith("{"):
            found.append(f"directive fence {token.markup}{token.info.strip()}")
        elif token.type == "html_block":
            found += [f"role {m.group(0)}" for m in MYST_ROLE.finditer(token.content)]
        elif token.type == "inline":
            children = token.children or []
            for child, after in zip(children, children[1:] + [None]):
                if child.type != "text":
                    continue
                role = MYST_NAME_AT_END.search(child.content)
                if role and after is not None and after.type == "code_inline":
                    found.append(f"role {role.group(0)}`{after.content}`")
                found += [f"directive {line.strip()}" for line in child.content.splitlines()
                          if MYST_COLON_FENCE.match(line)]
    return found


def show_source(obj) -> None:
    """Display the real source of a cipherlab function or class, highlighted, with its file and lines."""
    from IPython.display import Markdown, display

    obj = inspect.unwrap(obj)  # a functools.lru_cache or wraps decorator hides the function
    lines, start = inspect.getsourcelines(obj)
    path = Path(inspect.getsourcefile(obj)).resolve()
    try:
        shown = path.relative_to(REPO_ROOT)
    except ValueError:
        shown = path.name
    source = "".join(lines).rstrip("\n")
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", source)), default=0))
    display(Markdown(f"`{shown}`, lines {start}–{start + len(lines) - 1}:\n\n{fence}python\n{source}\n{fence}"))


# --------------------------------------------------------------------------- generated cells

def repository() -> tuple[str, str]:
    """(url, branch) from _config.yml, the one place the repository URL is written."""
    config_path = REPO_ROOT / "_config.yml"
    if not config_path.exists():
        raise FileNotFoundError(f"{config_path} not found: run `python -m cipherbook.viva sync` "
                                "from a source checkout (pip install -e .)")
    repo = yaml.safe_load(config_path.read_text(encoding="utf-8")).get("repository") or {}
    if "url" not in repo:
        raise KeyError(f"{config_path}: repository.url is missing")
    return repo["url"], repo.get("branch", "main")


# The setup cell's code; __URL__ and __TAG__ are filled in from _config.yml. It runs as plain Python in
# the kernel (no IPython magics: pip runs as `sys.executable -m pip`, what %pip does), so the tests can
# run it in a subprocess (tests/test_setup_cell.py).
_SETUP_CELL = r'''# Setup, written by `python -m cipherbook.viva sync`: where cipherlab is missing (Colab), it installs it,
# by default the release this book was built from:
#     git clone --depth 1 --branch __TAG__ __URL__
# Your own copy instead: set CIPHERLAB_SOURCE (here, or the environment variable of that name) to a git
# URL (add #branch for a branch or tag), a folder (a Drive folder such as /content/drive/MyDrive/cipherlab)
# or an uploaded .zip/.tar.gz of the repository.
CIPHERLAB_SOURCE = ""


def _install_cipherlab(source):
    import importlib, os, re, shutil, subprocess, sys
    from importlib import metadata
    from pathlib import Path

    class CipherlabSetupError(RuntimeError):
        def _render_traceback_(self):  # Jupyter and Colab show this one line, no traceback
            return [str(self)]

    def fail(what):
        raise CipherlabSetupError(
            f"cipherlab setup failed: {what}. To fix: set CIPHERLAB_SOURCE at the top of this cell to your "
            "copy of cipherlab (a git URL, a folder such as /content/drive/MyDrive/cipherlab, or an uploaded "
            ".zip/.tar.gz) and run the cell again (README: Run the chapters in Colab).") from None

    def reason(done):  # the line of a failed command's output that says why
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        said = [line for line in lines if line.lower().startswith(("fatal:", "error:"))]
        return (said or lines or [f"exit status {done.returncode}"])[-1]

    source = source.strip() or "__URL__#__TAG__"
    path = Path(source).expanduser()
    if path.is_dir():
        base = path
    elif path.is_file():
        base = Path.cwd() / (path.name.split(".")[0] + "-unpacked")
        import tarfile
        filtered = hasattr(tarfile, "data_filter")  # Python 3.12, and 3.8-3.11 patch releases since June 2023
        if not filtered and tarfile.is_tarfile(path):  # no filter: refuse what would land outside base
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    names = [member.name] + ([member.linkname] if member.issym() or member.islnk() else [])
                    if member.isdev() or any(os.path.isabs(n) or ".." in Path(n).parts for n in names):
                        fail(f"{path} holds {member.name!r}, which would be written outside {base}; unpack only "
                             "an archive made from your copy of the repository")
        try:
            shutil.unpack_archive(path, base, **({"filter": "data"} if filtered else {}))
        except Exception as error:
            fail(f"could not unpack {path} ({error}); a .zip or .tar.gz is expected")
    elif "://" in source or source.startswith("git@") or source.endswith(".git"):
        url, _, ref = source.partition("#")
        base = Path.cwd() / ("cipherlab-" + (re.sub(r"[^\w.-]", "-", ref) or "src"))
        if not (base / "pyproject.toml").is_file():
            command = ["git", "clone", "--depth", "1", *(["--branch", ref] if ref else []), url, str(base)]
            print(f"Cloning {url}" + (f" at {ref}" if ref else "") + " ...")
            try:
                done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                      env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
            except FileNotFoundError:
                fail("git is not installed here")
            if done.returncode:
                fail("git clone" + (f" --branch {ref}" if ref else "") + f" {url} failed ({reason(done)})")
    else:
        fail(f"CIPHERLAB_SOURCE={source!r} is neither a folder, a .zip/.tar.gz archive nor a git URL")
    root = next((d for d in [base, *sorted(base.iterdir())]
                 if (d / "pyproject.toml").is_file() and (d / "cipherlab" / "__init__.py").is_file()), None)
    if root is None:
        fail(f"{base} holds no cipherlab source (no pyproject.toml beside a cipherlab/ package)")

    def versions():
        return {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version for d in metadata.distributions()}

    before = versions()
    print(f"Installing cipherlab from {root} (about a minute) ...")
    book = [path for path in (root / "book",) if (path / "pyproject.toml").is_file()]  # the book's own tools
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--progress-bar", "off", "-e", str(root),
                           *[arg for path in book for arg in ("-e", str(path))]],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode:
        print(*(done.stdout + done.stderr).strip().splitlines()[-20:], sep="\n")  # pip's own account, in full
        fail(f"pip install -e {root} failed ({reason(done)})")
    importlib.invalidate_caches()
    after = versions()
    loaded = {d.lower().replace("_", "-") for module, dists in metadata.packages_distributions().items()
              if module in sys.modules for d in dists}
    changed = [f"{name} {old} -> {after[name]}" for name, old in sorted(before.items())
               if name in loaded and after.get(name, old) != old]
    sys.path.insert(0, str(root))  # this session imports it from there; the next finds it installed
    sys.path.insert(0, str(root / "book"))
    for module in [m for m in sys.modules if m == "cipherlab" or m.startswith("cipherlab.")]:
        del sys.modules[module]
    try:
        importlib.import_module("cipherlab.base.device")
    except ImportError as error:
        fail(f"cipherlab was installed from {root} but does not import ({error})")
    if changed:
        print("pip changed packages this session had already imported (" + ", ".join(changed) + "): "
              "Runtime > Restart session, then run this cell again.")
    else:
        print("Installed: no restart needed.")


import os, sys

try:
    from cipherlab.base.device import describe_device
except ImportError:
    _install_cipherlab(CIPHERLAB_SOURCE or os.environ.get("CIPHERLAB_SOURCE", ""))
    from cipherlab.base.device import describe_device
else:
    if CIPHERLAB_SOURCE or os.environ.get("CIPHERLAB_SOURCE"):
        import cipherlab
        print(f"cipherlab is already installed ({os.path.dirname(cipherlab.__file__)}), so CIPHERLAB_SOURCE is "
              "not used: to switch, run `%pip uninstall -y cipherlab`, restart the session, run this cell again.")
try:  # the book's own tools live beside the package, in the repository's book/ folder
    import cipherbook
except ImportError:
    import cipherlab
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(cipherlab.__file__))), "book"))
print(describe_device())'''


def setup_cell_source() -> str:
    """The first cell of every chapter: install cipherlab where it is missing (Colab), then say the device.

    A failed clone or install ends in one line that names what failed and what to do (never an
    ImportError cells later); ``CIPHERLAB_SOURCE`` points it at a student's own copy; where cipherlab
    already imports (a local checkout) it installs nothing."""
    url, branch = repository()
    return _SETUP_CELL.replace("__URL__", url).replace("__TAG__", branch)


def _nbformat():
    """Jupyter's notebook library, imported only by the tools that write notebooks."""
    import nbformat

    return nbformat


def _cell_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", text)[:64]


def _code(source: str, cell_id: str, role: str, tags: list[str] | None = None):
    cell = _nbformat().v4.new_code_cell(source, id=_cell_id(cell_id))
    cell.metadata[GENERATED_KEY] = role
    if tags:
        cell.metadata["tags"] = tags
    return cell


def _markdown(source: str, cell_id: str):
    cell = _nbformat().v4.new_markdown_cell(source, id=_cell_id(cell_id))
    cell.metadata[GENERATED_KEY] = "viva"
    return cell


def spoken_words(text: str, tables: bool = False) -> int:
    """How many words a student would say: a formula counts as one word, a code span as one, a
    fact placeholder as one; code blocks are not counted, and tables only with ``tables=True``
    (a viva answer points at its table; a chapter's teaching body counts the tables it shows)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " M ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", "M", text)
    if not tables:  # a table in a viva answer is pointed at; one in the teaching body is read
        text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))
    text = FACT_ROLE.sub("N", text)
    text = re.sub(r"`[^`]*`", "X", text)
    return len(re.findall(r"[A-Za-z0-9][\w'’.,%-]*", text))


def lead_words(q: Question) -> int:
    """Words of a lead as a student says it, strictly counted: every run of letters or digits of
    the text with its numbers filled in (maths and code included, "C2's" is two)."""
    return len(re.findall(r"\w+", fill_facts(q.lead, q.chapter)))


def answer_markdown(q: Question) -> str:
    """The answer as it is shown: the lead in bold, then what to add if the examiner presses."""
    answer = fill_facts(q.answer, q.chapter)
    if not q.lead:
        return answer
    return f"**{fill_facts(q.lead, q.chapter)}**\n\n*If the examiner presses:*\n\n{answer}"


def render_question(number: int, q: Question) -> str:
    """One question as CommonMark + HTML: the question in bold with its source, then the answer
    folded in ``<details>`` (closed in Colab, JupyterLab, GitHub and on the site), numbers filled in.

    The blank lines inside ``<details>`` let the answer's markdown, maths and lists render.
    """
    return (f"**Q{number}. {fill_facts(shown_question(q), q.chapter)}**\n\n"
            f"<small>{q.source} · id `{q.id}`</small>\n\n"
            f"<details>\n<summary>Answer</summary>\n\n{answer_markdown(q)}\n\n</details>")


def viva_cells(chapter: str) -> list:
    """The viva section that ends a chapter notebook, generated from bank/<chapter>.yml."""
    cells = [_markdown(
        f"{VIVA_HEADING}\n\n"
        "Answer each question out loud, in full sentences, before you open its answer. "
        f"They are generated from `book/cipherbook/viva/bank/{chapter}.yml`; every number in an answer "
        f"is computed by `book/cipherbook/experiments/{chapter}.py` and written in by "
        "`python -m cipherbook.viva sync`, and a test fails when the two disagree.", "viva-heading")]
    cells += [_markdown(render_question(n, q), f"viva-{q.id}") for n, q in enumerate(questions(chapter), 1)]
    return cells


# The teaching body of a chapter: its markdown before the exercises and the viva bank, outside
# <details> (where evidence and solutions fold away), counted as spoken_words counts.
TEACHING_BUDGET = 2_500
TEACHING_BUDGETS = {"09_results.ipynb": 3_000}  # the report a student hands in may run longer
APPENDIX_TEACHING_BUDGET = 1_500  # an appendix keeps its lessons; its evidence lives in results/ or in <details>
BOOK_TEACHING_BUDGET = 22_000
# Everything a reader of chapters 1-12 can read: the teaching body, the exercises, what <details>
# folds away and the viva answers, counted as teaching_words counts (tables included).
BOOK_PROSE_BUDGET = 45_000
_BODY_ENDS = re.compile(r"^#+ (Exercises|Viva questions)\b", re.M)


def teaching_words(notebook: Path) -> int:
    """Words of ``notebook``'s teaching body: markdown cells up to the first ``## Exercises`` or
    ``## Viva questions`` heading, without what ``<details>`` blocks fold away or HTML tags."""
    parts = []
    for cell in _nbformat().read(notebook, as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        end = _BODY_ENDS.search(cell.source)
        text = cell.source[:end.start()] if end else cell.source
        text = re.sub(r"<details>.*?</details>", " ", text, flags=re.S)
        parts.append(re.sub(r"<[^>]+>", " ", text))
        if end:
            break
    return spoken_words("\n\n".join(parts), tables=True)


def prose_words(notebook: Path) -> int:
    """Words of every markdown cell of ``notebook``, folded or not, viva answers included, as
    spoken_words counts them with tables (HTML tags are not words)."""
    cells = _nbformat().read(notebook, as_version=4).cells
    text = "\n\n".join(re.sub(r"<[^>]+>", " ", c.source) for c in cells if c.cell_type == "markdown")
    return spoken_words(text, tables=True)


def teaching_budget(notebook: Path) -> int:
    """The most words ``notebook``'s teaching body may have. An appendix has its own, smaller budget:
    it keeps what a student needs from the evidence, and the rest of the evidence goes to the
    ``results/`` READMEs or into ``<details>`` (its words are not counted in the book's budget)."""
    if is_appendix(notebook):
        return APPENDIX_TEACHING_BUDGET
    return TEACHING_BUDGETS.get(Path(notebook).name, TEACHING_BUDGET)


def book_notebooks() -> list[Path]:
    """Every chapter notebook of the book, in order."""
    return sorted((REPO_ROOT / "book").glob("*.ipynb"))


def chapter_or_none(notebook: Path) -> str | None:
    """The chapter whose bank names this notebook, or None for a notebook with no bank (the drill)."""
    try:
        return chapter_of(notebook)
    except KeyError:
        return None


def chapter_of(notebook: Path) -> str:
    """The chapter whose bank names this notebook, as the chapter's own or as its appendix."""
    rel = Path(notebook).resolve().relative_to(REPO_ROOT).as_posix()
    for bank in load_bank().values():
        if rel in (bank.notebook, bank.appendix):
            return bank.chapter
    raise KeyError(f"no bank in {BANK_DIR} has notebook: {rel}; add one (see bank/attention.yml)")


def is_appendix(notebook: Path) -> bool:
    """True for a notebook a bank names as its chapter's appendix: the chapter's facts, no viva."""
    rel = Path(notebook).resolve().relative_to(REPO_ROOT).as_posix()
    return any(bank.appendix == rel for bank in load_bank().values())


def expected_notebook(nb, chapter: str | None, viva: bool = True):
    """The notebook as sync would write it: generated cells replaced, the facts in the prose
    refilled, every code cell's stored outputs kept (``python -m cipherbook.viva outputs`` writes
    them; a setup cell whose source changed loses its outputs, as they no longer belong to it)."""
    new = _nbformat().from_dict(nb)
    old_setup = next((c for c in new.cells if c.metadata.get(GENERATED_KEY) == "setup"), None)
    body = [c for c in new.cells if GENERATED_KEY not in c.metadata]
    for n, cell in enumerate(body):
        if cell.cell_type == "markdown" and chapter is not None:
            cell.source = refill_prose(cell.source, chapter, f"markdown cell {n + 2} of the {chapter} chapter")
    viva = viva_cells(chapter) if chapter is not None and viva else []
    # The setup cell prints the machine's device, which differs from machine to machine.
    setup = _code(setup_cell_source(), "setup", "setup", tags=["remove-cell", "nbval-ignore-output"])
    if old_setup is not None and old_setup.source == setup.source:
        setup.outputs, setup.execution_count = old_setup.outputs, old_setup.execution_count
    new.cells = [setup] + body + viva
    new.nbformat, new.nbformat_minor = 4, 5
    return new


def _texts(path: Path) -> tuple[str, str]:
    """(the notebook file as it is, as sync would write it)."""
    nbformat = _nbformat()
    before = Path(path).read_text(encoding="utf-8")
    after = nbformat.writes(expected_notebook(nbformat.reads(before, as_version=4), chapter_or_none(path),
                                              viva=not is_appendix(path)))
    return before, after + "\n"


def sync_notebook(path: Path) -> bool:
    """(Re)write a chapter's setup and viva cells and the facts in its prose; True when the file changed."""
    before, after = _texts(path)
    if after != before:
        Path(path).write_text(after, encoding="utf-8")
    return after != before


def notebook_in_sync(path: Path) -> bool:
    """True when ``sync`` would leave the notebook unchanged."""
    before, after = _texts(path)
    return before == after
