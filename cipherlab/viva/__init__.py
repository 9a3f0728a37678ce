"""The viva bank and the tools that put it into the book (every chapter; see the intro).

Half of the course mark is an oral exam, the viva. Its questions live in ONE place,
``cipherlab/viva/bank/<chapter>.yml``; this module turns that source into the last cells
of each chapter notebook, so the book and the bank never drift apart.

- ``load_bank()`` / ``questions(chapter)`` read and validate the YAML banks.
- ``cipherlab/viva/facts/<chapter>.py`` holds ``FACTS``: every number an answer quotes is
  computed there from the package, never typed by hand. An answer cites a fact as
  ``{fact}`key``` or with a format, ``{fact}`key:.3f```; ``fill_facts(text, chapter)`` puts
  the computed numbers in.
- A chapter's prose may quote a fact too, written as ``<span data-fact="key:.3f">0.123</span>``:
  plain HTML, so the number shows in Colab, JupyterLab and on GitHub as well as on the site.
  ``sync`` rewrites the number between the tags from the facts, and the book's tests fail
  when the notebook and the facts disagree (``notebook_in_sync``).
- ``show_source(obj)`` displays the real source of a cipherlab object in a notebook.
- ``setup_cell_source()``, ``viva_cells(chapter)`` and ``sync_notebook(path)`` write the
  generated cells; run them as ``python -m cipherlab.viva sync`` (see ``__main__``).
- ``myst_markup(text)`` lists what in a piece of markdown only MyST would render (roles,
  directive fences): nothing of the kind may reach a notebook, because Colab and Jupyter
  show it raw.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from cipherlab.viva.facts import load_facts

BANK_DIR = Path(__file__).parent / "bank"
REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOT = Path(__file__).resolve().parents[1]

REQUIRED_KEYS = {"id", "source", "question", "answer"}
LEAD_WORDS = 50  # a lead is said in about 20 seconds
ANSWER_WORDS_MAX = 250  # lead + answer, maths, code and tables not counted
ANSWER_WORDS_MEDIAN = 150

# Marks every cell that ``sync`` writes, so it can find and replace them.
GENERATED_KEY = "cipherlab_generated"
VIVA_HEADING = "## Viva questions"

# A placeholder in the bank: {fact}`key` or {fact}`key:.3f` -> (key, format spec)
FACT_ROLE = re.compile(r"\{fact\}`([^`:]+)(?::([^`]*))?`")
# A fact written into a chapter's prose: <span data-fact="key:.3f">0.123</span>
FACT_SPAN = re.compile(r'<span data-fact="([^":]+)(?::([^"]*))?">([^<]*)</span>')
# What only MyST renders: a role {name}`...` and a directive fence ```{name} or :::{name}
MYST_ROLE = re.compile(r"\{[A-Za-z][\w:.+-]*\}`")
MYST_NAME_AT_END = re.compile(r"\{[A-Za-z][\w:.+-]*\}$")  # a text token just before a code span
MYST_COLON_FENCE = re.compile(r"\s*:{3,}\s*\{")


@dataclass(frozen=True)
class Question:
    """One viva question and its answer (CommonMark with $maths$ and {fact} placeholders).

    ``lead`` is what a student says first, in about 20 seconds (at most ``LEAD_WORDS`` words);
    ``answer`` is what follows if the examiner presses: the derivation, cipherlab's numbers, the
    code, and at the end, briefly, where the course notes claim more than they show.
    """

    id: str
    source: str
    question: str
    answer: str
    chapter: str
    lead: str = ""


@dataclass(frozen=True)
class ChapterBank:
    """The questions of one chapter and the notebook whose viva section shows them."""

    chapter: str
    notebook: str  # path relative to the repository root, e.g. "book/02_attention.ipynb"
    questions: tuple[Question, ...]


def _require_str(entry: dict, field: str, where: str) -> str:
    value = entry.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: field {field!r} must be a non-empty string, got {value!r}")
    return value.strip()


def load_chapter(path: Path) -> ChapterBank:
    """Parse and validate one bank file; errors name the file, the question and the fix."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or set(data) != {"chapter", "notebook", "questions"}:
        raise ValueError(f"{path}: expected exactly the keys chapter, notebook, questions at top level")
    if data["chapter"] != path.stem:
        raise ValueError(f"{path}: chapter is {data['chapter']!r}; it must equal the file stem {path.stem!r}")
    items = []
    for n, entry in enumerate(data["questions"] or [], start=1):
        where = f"{path}, question {n}"
        if not isinstance(entry, dict) or not REQUIRED_KEYS <= set(entry) <= REQUIRED_KEYS | {"lead"}:
            raise ValueError(f"{where}: expected the keys id, source, question, lead, answer")
        question = _require_str(entry, "question", where)
        if "\n\n" in question:
            raise ValueError(f"{where}: the question must be one paragraph (it is shown in bold)")
        items.append(Question(id=_require_str(entry, "id", where), source=_require_str(entry, "source", where),
                              question=question, answer=_require_str(entry, "answer", where),
                              chapter=data["chapter"],
                              lead=_require_str(entry, "lead", where) if "lead" in entry else ""))
    return ChapterBank(chapter=data["chapter"], notebook=data["notebook"], questions=tuple(items))


def load_bank() -> dict[str, ChapterBank]:
    """Every chapter's bank, keyed by chapter, in notebook order; question ids are unique across them."""
    banks = sorted((load_chapter(p) for p in BANK_DIR.glob("*.yml")), key=lambda b: b.notebook)
    seen: dict[str, str] = {}
    for bank in banks:
        for q in bank.questions:
            if q.id in seen:
                raise ValueError(f"question id {q.id!r} appears in both {seen[q.id]}.yml and {bank.chapter}.yml")
            seen[q.id] = bank.chapter
    return {bank.chapter: bank for bank in banks}


def questions(chapter: str) -> tuple[Question, ...]:
    """The questions of one chapter, in bank order."""
    return _bank_for(chapter).questions


def _bank_for(chapter: str) -> ChapterBank:
    path = BANK_DIR / f"{chapter}.yml"
    if not path.exists():
        known = sorted(p.stem for p in BANK_DIR.glob("*.yml"))
        raise KeyError(f"no viva bank for chapter {chapter!r} (expected {path}); known chapters: {known}")
    return load_chapter(path)


def cited_facts(text: str) -> list[str]:
    """The fact keys that a bank text cites with ``{fact}`key```, in order of first use."""
    return list(dict.fromkeys(m.group(1) for m in FACT_ROLE.finditer(text)))


def prose_facts(text: str) -> list[str]:
    """The fact keys that a chapter's prose quotes with ``<span data-fact="key">``."""
    return list(dict.fromkeys(m.group(1) for m in FACT_SPAN.finditer(text)))


def _plain(value, key: str, chapter: str):
    """Facts are plain Python numbers or strings (numpy scalars would print as np.float64(...))."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"fact {key!r} of cipherlab/viva/facts/{chapter}.py returned {value!r}; "
                        "return an int, float or short str")
    return value


def compute_facts(chapter: str) -> dict:
    """Compute every fact of a chapter; raises if an answer cites a key that FACTS lacks."""
    return dict(_compute_facts(chapter))


@functools.lru_cache(maxsize=None)
def _compute_facts(chapter: str) -> tuple:
    facts = load_facts(chapter)
    missing = [k for q in questions(chapter) for k in cited_facts(q.question + q.lead + q.answer) if k not in facts]
    if missing:
        raise KeyError(f"bank/{chapter}.yml cites {missing}, which cipherlab/viva/facts/{chapter}.py "
                       "does not define in FACTS; add them there")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same float rounding wherever sync or the tests compute them
    try:
        return tuple((key, _plain(fn(), key, chapter)) for key, fn in facts.items())
    finally:
        torch.set_num_threads(threads)


def format_fact(value, spec: str | None) -> str:
    """A fact as the text shows it: ``format(value, spec)``, or ``str(value)`` without a spec.

    The spec ``bound`` writes the smallest power of ten at or above ``|value|`` ("1e-07"), for
    sizes of float rounding error: their digits change with the CPU and the thread count, their
    order of magnitude does not, so the sentence says "below 1e-07".
    """
    if spec == "bound":
        if value == 0:
            return "0"
        return f"1e{math.ceil(math.log10(abs(value))):+03d}"
    return format(value, spec) if spec else str(value)


def _lookup(values: dict, key: str, chapter: str, where: str):
    if key not in values:
        raise KeyError(f"{where} quotes the fact {key!r}, which cipherlab/viva/facts/{chapter}.py "
                       "does not define in FACTS; add it there or remove the quote")
    return values[key]


def fill_facts(text: str, chapter: str) -> str:
    """Replace the ``{fact}`key:spec``` placeholders of a bank text by the computed facts."""
    if not cited_facts(text):
        return text
    values = compute_facts(chapter)

    def paste(match: re.Match) -> str:
        value = _lookup(values, match.group(1), chapter, f"bank/{chapter}.yml")
        return format_fact(value, match.group(2))

    return FACT_ROLE.sub(paste, text)


def refill_prose(text: str, chapter: str, where: str = "a markdown cell") -> str:
    """Rewrite the number inside every ``<span data-fact="key:spec">`` of ``text`` from the facts."""
    if not prose_facts(text):
        return text
    values = compute_facts(chapter)

    def paste(match: re.Match) -> str:
        key, spec = match.group(1), match.group(2)
        value = format_fact(_lookup(values, key, chapter, where), spec)
        attribute = f"{key}:{spec}" if spec else key
        return f'<span data-fact="{attribute}">{value}</span>'

    return FACT_SPAN.sub(paste, text)


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
        shown = path.relative_to(PACKAGE_ROOT.parent)
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
        raise FileNotFoundError(f"{config_path} not found: run `python -m cipherlab.viva sync` "
                                "from a source checkout (pip install -e .)")
    repo = yaml.safe_load(config_path.read_text(encoding="utf-8")).get("repository") or {}
    if "url" not in repo:
        raise KeyError(f"{config_path}: repository.url is missing")
    return repo["url"], repo.get("branch", "main")


def setup_cell_source() -> str:
    """The first cell of every chapter: install cipherlab where it is missing (Colab), then say the device."""
    url, branch = repository()
    folder = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    return f"""\
# Setup, written by `python -m cipherlab.viva sync`: on Colab it fetches and installs cipherlab.
try:
    import cipherlab
except ImportError:
    !git clone --depth 1 --branch {branch} {url}
    %pip install -q -e {folder}
    import sys; sys.path.insert(0, "{folder}")
from cipherlab.device import describe_device
print(describe_device())"""


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


def spoken_words(text: str) -> int:
    """How many words a student would say: maths, code, tables and fact placeholders' markup are
    not counted (a formula or a table is pointed at, not read out word by word)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", " ", text)
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
    return (f"**Q{number}. {fill_facts(q.question, q.chapter)}**\n\n"
            f"<small>{q.source} · id `{q.id}`</small>\n\n"
            f"<details>\n<summary>Answer</summary>\n\n{answer_markdown(q)}\n\n</details>")


def viva_cells(chapter: str) -> list:
    """The viva section that ends a chapter notebook, generated from bank/<chapter>.yml."""
    cells = [_markdown(
        f"{VIVA_HEADING}\n\n"
        "Answer each question out loud, in full sentences, before you open its answer. "
        f"They are generated from `cipherlab/viva/bank/{chapter}.yml`; every number in an answer "
        f"is computed by `cipherlab/viva/facts/{chapter}.py` and written in by "
        "`python -m cipherlab.viva sync`, and a test fails when the two disagree.", "viva-heading")]
    cells += [_markdown(render_question(n, q), f"viva-{q.id}") for n, q in enumerate(questions(chapter), 1)]
    return cells


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
    """The chapter whose bank names this notebook."""
    rel = Path(notebook).resolve().relative_to(REPO_ROOT).as_posix()
    for bank in load_bank().values():
        if bank.notebook == rel:
            return bank.chapter
    raise KeyError(f"no bank in {BANK_DIR} has notebook: {rel}; add one (see bank/attention.yml)")


def expected_notebook(nb, chapter: str | None):
    """The notebook as sync would write it: generated cells replaced, the facts in the prose
    refilled, every code cell's stored outputs kept (``python -m cipherlab.viva outputs`` writes
    them; a setup cell whose source changed loses its outputs, as they no longer belong to it)."""
    new = _nbformat().from_dict(nb)
    old_setup = next((c for c in new.cells if c.metadata.get(GENERATED_KEY) == "setup"), None)
    body = [c for c in new.cells if GENERATED_KEY not in c.metadata]
    for n, cell in enumerate(body):
        if cell.cell_type == "markdown" and chapter is not None:
            cell.source = refill_prose(cell.source, chapter, f"markdown cell {n + 2} of the {chapter} chapter")
    viva = viva_cells(chapter) if chapter is not None else []
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
    after = nbformat.writes(expected_notebook(nbformat.reads(before, as_version=4), chapter_or_none(path)))
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
