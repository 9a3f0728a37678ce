"""Check a course hand-in before it is handed in: ``python -m cipherlab check handin PATH``.

The assignment's handout asks for one zip, ``<rollnumber>_assignment1.zip``, in a fixed layout
(:data:`REQUIRED`), with the Transformer's parts written as the student's own nn.Module classes: no
ready-made ``nn.Transformer*`` or ``nn.MultiheadAttention``. :func:`check_handin` reads a hand-in folder
or its zip and returns a :class:`HandinReport`, one :class:`Row` per item, PASS, WARN or FAIL with the
fix, so that everything wrong is named in one run, not one fault per run:

- the zip's name (a folder's name is only looked at: the name that counts is the zip's, so a folder
  never fails on it);
- each required file and folder (``outputs/`` not empty), and each model module defining an
  nn.Module subclass (read from the source, nothing imported);
- ready-made modules anywhere under ``src/`` (FAIL at file:line; ``F.scaled_dot_product_attention`` a
  WARN) and imports of cipherlab there (FAIL: the code must be the student's own);
- each class of ``src/models/`` whose name says which part it is (:data:`PART_NAMES`) run through that
  part's checks (:data:`cipherlab.student.check.PARTS`), the first failing check named;
- the README's Hugging Face and W&B links, ``wandb`` in ``src/train.py``, and ``Report.pdf``'s page
  count (pypdf, imported only here: ``pip install 'cipherlab[handin]'``).

Nothing of the student's is written to: a zip is extracted into a temporary folder only (absolute
members and ``..`` refused, one wrapper folder tolerated), and a folder's ``src/`` is copied there
before any of it is imported, with ``sys.dont_write_bytecode`` on (no ``__pycache__``); the modules
imported are dropped from ``sys.modules`` afterwards, so a second hand-in in the same process gets
its own ``src``.
"""

from __future__ import annotations

import ast
import contextlib
import logging
import re
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath

from cipherlab.runner.errors import why
from cipherlab.student.check import PARTS, InterfaceError, load_target

__all__ = ["FORBIDDEN", "FUSED", "HandinReport", "MAX_PAGES", "MAX_UNZIPPED_BYTES", "PART_NAMES", "REQUIRED", "Row",
           "ZIP_NAME", "check_handin", "part_for"]

REQUIRED = {
    "src/models/attention.py": "your scaled dot-product attention, MHA/GQA and FFN",
    "src/models/positional.py": "your positional encodings (sinusoidal, RoPE)",
    "src/models/norm.py": "your LayerNorm, RMSNorm and Pre-LN block",
    "src/models/blt.py": "your BLT's local encoder and decoder",
    "src/dataset.py": "your dataset code",
    "src/train.py": "your training loop, logged with Weights & Biases",
    "src/utils.py": "your metrics and plots",
    "outputs/": "your plots and logs",
    "README.md": "set-up steps and your Hugging Face links",
    "Report.pdf": "your report, at most 6 pages",
}
"""The handout's layout: each path (a folder ends in ``/``) and what it holds, the words of a missing one's fix."""
MODEL_FILES = [p for p in REQUIRED if p.startswith("src/models/")]

ZIP_NAME = re.compile(r"[A-Za-z0-9]+_assignment1\.zip")
"""``<rollnumber>_assignment1.zip``: a roll number of letters and digits (2021CS10123), then the fixed suffix."""

FORBIDDEN = ("Transformer", "TransformerEncoder", "TransformerEncoderLayer", "TransformerDecoder",
             "TransformerDecoderLayer", "MultiheadAttention")
"""The ready-made modules of torch.nn the handout forbids (a FAIL wherever ``src/`` uses one)."""
FUSED = "scaled_dot_product_attention"
"""PyTorch's fused attention function: a WARN, since the handout forbids ready-made modules and asks for your own."""

PART_NAMES = (
    ("rmsnorm", re.compile(r"RMSNorm|RmsNorm|RMS_Norm")),
    ("layernorm", re.compile(r"LayerNorm|Layernorm")),
    ("rope", re.compile(r"RoPE|Rope|ROPE|Rotary")),
    ("sinusoidal", re.compile(r"Sinusoid")),
    ("gqa", re.compile(r"GQA|GroupedQuery|GroupQuery")),
    ("mha", re.compile(r"MultiHead|Multihead|MHA")),
    ("attention", re.compile(r"ScaledDotProduct|SDPA|^Attention$")),
    ("pooling", re.compile(r"PatchPool|Pooling")),
)
"""Which check part a class is, by its name; conservative, so a name that could be two parts is checked by hand."""

MAX_PAGES = 6
MAX_UNZIPPED_BYTES = 2 * 1024 ** 3
"""The most a zip may unpack to (2 GiB): a hand-in is code, plots and a report; checkpoints go to Hugging Face."""
_JUNK = {"__MACOSX", ".DS_Store", "Thumbs.db", "desktop.ini"}  # what zip tools add beside the hand-in
_HF_LINK = re.compile(r"https?://(?:www\.)?(?:huggingface\.co|hf\.co)/((?:datasets/|spaces/)?[\w.-]+/[\w.-]+)"
                      r"(?:/[\w.%~-]+)*")
_HF_NOT_A_REPO = {"docs", "blog", "learn", "papers", "models", "tasks", "settings", "login", "join", "pricing"}
_WANDB_LINK = re.compile(r"https?://(?:www\.)?wandb\.ai/[\w.-]+(?:/[\w.%~-]+)*")
_FIX_CHECK = "python -m cipherlab check"


@dataclass
class Row:
    """One item of the hand-in: PASS, WARN or FAIL, what was checked, and what was found or the fix."""

    status: str
    item: str
    detail: str


@dataclass
class HandinReport:
    """The rows of one hand-in's check; ``passed`` when no row is a FAIL (a WARN is for the student to read)."""

    path: str
    rows: list[Row] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.count("FAIL")

    def count(self, status: str) -> int:
        return sum(row.status == status for row in self.rows)

    def __str__(self) -> str:
        width = min(max((len(row.item) for row in self.rows), default=0), 40)
        lines = [f"check handin: {self.path}"]
        lines += [f"  {row.status:<4}  {row.item:<{width}}  {row.detail}" for row in self.rows]
        fails, warns = self.count("FAIL"), self.count("WARN")
        verdict = (f"fix each FAIL, then run `{_FIX_CHECK} handin` again" if fails
                   else "no FAIL: ready to hand in" + (", once you have read each WARN" if warns else ""))
        lines.append(f"{len(self.rows)} items: {self.count('PASS')} PASS, {warns} WARN, {fails} FAIL; {verdict}")
        return "\n".join(lines)


def check_handin(path) -> HandinReport:
    """Check the hand-in at ``path`` (its folder, or its zip) item by item; see the module docstring.

    A missing path, or a zip that cannot be read safely, is a one-line ValueError (FileNotFoundError)
    naming it and the fix; everything about the hand-in itself is a row of the report.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such folder or zip; pass your hand-in folder or its "
                                "<rollnumber>_assignment1.zip")
    with tempfile.TemporaryDirectory(prefix="cipherlab-handin-") as tmp:
        if path.is_dir():
            rows, root = [_folder_name_row(path)], _inner(path)
            shown = f"{root}/"
            work = Path(tmp) / "handin"
            if (root / "src").is_dir():  # the student's code is imported from a copy: their folder is only read
                shutil.copytree(root / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            rows, root = [_zip_name_row(path)], _inner(_unzip(path, Path(tmp) / "handin"))
            work, shown = root, ""
        rows += _layout_rows(root)
        rows += _module_rows(root)
        rows += _source_rows(root)
        rows += _part_rows(work, shown)
        rows += _readme_rows(root)
        rows += _wandb_rows(root)
        rows += _report_rows(root)
    return HandinReport(str(path), rows)


# --------------------------------------------------------------------------- the name and the zip

def _folder_name_row(path: Path) -> Row:
    """A folder's name is not what is handed in: PASS when it already reads like the zip's stem, else a WARN."""
    name = path.resolve().name
    if ZIP_NAME.fullmatch(f"{name}.zip"):
        return Row("PASS", "zip name", f"a folder: zip it as {name}.zip and check the zip too")
    return Row("WARN", "zip name", "not checked for a folder: zip it as <rollnumber>_assignment1.zip "
               f"(e.g. 2021CS10123_assignment1.zip) and run `{_FIX_CHECK} handin` on the zip")


def _zip_name_row(path: Path) -> Row:
    if ZIP_NAME.fullmatch(path.name):
        return Row("PASS", "zip name", path.name)
    return Row("FAIL", "zip name", f"{path.name} is not <rollnumber>_assignment1.zip; rename it, "
               "e.g. 2021CS10123_assignment1.zip (letters and digits, then _assignment1.zip)")


def _unzip(path: Path, into: Path) -> Path:
    """Extract zip ``path`` into folder ``into`` (created), member by member; a member with an absolute path or
    a ``..``, a password, or more than MAX_UNZIPPED_BYTES in all is a ValueError naming the zip and the fix."""
    remake = f"make it again from inside your hand-in folder: `zip -r {path.name} src outputs README.md Report.pdf`"
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ValueError(f"{path}: not a folder nor a readable zip ({why(e)}); {remake}") from None
    with archive:
        members = []
        for info in archive.infolist():
            name = info.filename.replace("\\", "/")
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if name.startswith("/") or re.match(r"[A-Za-z]:", name):
                raise ValueError(f"{path}: member {info.filename!r} has an absolute path; {remake}")
            if ".." in parts:
                raise ValueError(f"{path}: member {info.filename!r} climbs out of the folder with '..'; {remake}")
            if info.flag_bits & 0x1:
                raise ValueError(f"{path}: member {info.filename!r} is password-protected; zip it without a password")
            if parts and not _JUNK.intersection(parts):
                members.append((info, parts))
        total = sum(info.file_size for info, _ in members)
        if total > MAX_UNZIPPED_BYTES:
            raise ValueError(f"{path}: unpacks to {total / 1024 ** 3:.1f} GiB, more than a hand-in of code, plots "
                             f"and a report ({MAX_UNZIPPED_BYTES / 1024 ** 3:g} GiB at most); put checkpoints on "
                             "Hugging Face and leave them out of the zip")
        into.mkdir(parents=True)
        try:
            for info, parts in members:
                target = into.joinpath(*parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
            raise ValueError(f"{path}: cannot extract it ({why(e)}); {remake}") from None
    return into


def _inner(folder: Path) -> Path:
    """``folder``, or the one folder inside it when that is all it holds (a zip made of the folder, not its files)."""
    entries = [p for p in folder.iterdir() if p.name not in _JUNK]
    if len(entries) == 1 and entries[0].is_dir() and entries[0].name not in ("src", "outputs"):
        return entries[0]
    return folder


# --------------------------------------------------------------------------- the layout

def _layout_rows(root: Path) -> list[Row]:
    rows = []
    for rel, what in REQUIRED.items():
        target = root / rel
        if rel.endswith("/"):
            files = [p for p in target.rglob("*") if p.is_file() and p.name not in _JUNK] if target.is_dir() else []
            if files:
                rows.append(Row("PASS", rel, f"{len(files)} file(s)"))
            elif target.is_dir():
                rows.append(Row("FAIL", rel, f"empty; add {what}"))
            else:
                rows.append(Row("FAIL", rel, f"missing; add the folder with {what}{_elsewhere(root, rel)}"))
        elif target.is_file():
            rows.append(Row("PASS", rel, "present"))
        else:
            rows.append(Row("FAIL", rel, f"missing; add {rel} with {what}{_elsewhere(root, rel)}"))
    return rows


def _elsewhere(root: Path, rel: str) -> str:
    """`` (found at X: move it there)`` when a file or folder of that name, in any case, is elsewhere in the hand-in."""
    name = PurePosixPath(rel).name.lower()
    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                   if p.name.lower() == name and "__pycache__" not in p.parts)
    return f" (found {found[0]}: move or rename it to {rel})" if found else ""


def _parse(root: Path, rel: str) -> tuple[ast.Module | None, Row | None]:
    """The syntax tree of ``root/rel``, or a FAIL row naming the line it cannot be read at."""
    try:
        return ast.parse((root / rel).read_bytes(), filename=rel), None
    except SyntaxError as e:
        return None, Row("FAIL", f"{rel}:{e.lineno}", f"syntax error ({e.msg}); fix that line")
    except (OSError, ValueError) as e:
        return None, Row("FAIL", rel, f"cannot be read ({why(e)}); save it again as UTF-8 Python")


def _module_classes(tree: ast.Module) -> list[str]:
    """The top-level classes of ``tree`` that subclass nn.Module, directly (``nn.Module``, ``torch.nn.Module``,
    ``Module``) or through another class of the same file."""
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    found: list[str] = []
    changed = True
    while changed:  # a class whose base is a module class of this file is one too
        changed = False
        for node in classes:
            bases = {_dotted(b) for b in node.bases}
            if node.name not in found and bases & ({"nn.Module", "torch.nn.Module", "Module"} | set(found)):
                found.append(node.name)
                changed = True
    return [node.name for node in classes if node.name in found]


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a name or an attribute chain; empty for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _module_rows(root: Path) -> list[Row]:
    rows = []
    for rel in MODEL_FILES:
        if not (root / rel).is_file():
            continue  # its layout row already says it is missing
        tree, failed = _parse(root, rel)
        if failed:
            rows.append(failed)
            continue
        classes = _module_classes(tree)
        if classes:
            rows.append(Row("PASS", f"{rel} classes", "nn.Module subclasses: " + ", ".join(classes)))
        else:
            rows.append(Row("FAIL", f"{rel} classes", f"defines no nn.Module subclass; write {REQUIRED[rel]} "
                            "as nn.Module classes of your own"))
    return rows


# --------------------------------------------------------------------------- what src/ uses

def _source_rows(root: Path) -> list[Row]:
    """Ready-made modules and imports of cipherlab anywhere under ``src/``: a row each, at its file:line."""
    files = sorted(p for p in (root / "src").rglob("*.py") if "__pycache__" not in p.parts) \
        if (root / "src").is_dir() else []
    if not files:
        return []
    ready, own, unreadable = [], [], []
    for path in files:
        rel = path.relative_to(root).as_posix()
        tree, failed = _parse(root, rel)
        if failed:
            if rel not in MODEL_FILES:  # a model file's syntax error has its row already
                unreadable.append(failed)
            continue
        uses, imports = _uses(tree, rel)
        ready += uses
        own += imports
    if not any(row.status == "FAIL" for row in ready):
        ready.insert(0, Row("PASS", "ready-made modules", "no nn.Transformer* or nn.MultiheadAttention in src/ "
                            f"({len(files)} Python files)"))
    own = own or [Row("PASS", "own code", "src/ imports nothing of cipherlab")]
    return unreadable + ready + own


def _uses(tree: ast.Module, rel: str) -> tuple[list[Row], list[Row]]:
    """The rows of ``tree``'s ready-made modules (FAIL, WARN for the fused attention) and of its cipherlab imports."""
    rows, imports = [], []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Attribute) and node.attr in (*FORBIDDEN, FUSED):
            names = [_dotted(node) or node.attr]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            names = [f"{node.module}.{a.name}" for a in node.names if a.name in (*FORBIDDEN, FUSED)]
        for name in names:
            if name.endswith(FUSED):
                rows.append(Row("WARN", f"{rel}:{node.lineno}", f"{name}: PyTorch's fused attention; the handout "
                                "forbids ready-made modules, so compute softmax(q k^T / sqrt(d)) v yourself"))
            elif name.split(".")[-1] in FORBIDDEN and ("nn" in name.split(".")[:-1] or name.startswith("torch")):
                rows.append(Row("FAIL", f"{rel}:{node.lineno}", f"{name} is a ready-made module the handout "
                                "forbids; use your own nn.Module class instead"))
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                   else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(m.split(".")[0] == "cipherlab" for m in modules):
            imports.append(Row("FAIL", f"{rel}:{node.lineno}", "imports cipherlab; the hand-in's code must be your "
                               "own: import nothing of cipherlab, write the part yourself"))
    by_line = partial(sorted, key=lambda row: int(row.item.rpartition(":")[2]))
    return by_line(rows), by_line(imports)


# --------------------------------------------------------------------------- the parts' checks

def part_for(name: str) -> list[str]:
    """The check parts a class called ``name`` may be (:data:`PART_NAMES`): none, one, or more when its name
    says two (a GQA class named MultiHead... is gqa; an attention named MultiHead... is mha)."""
    parts = [part for part, pattern in PART_NAMES if pattern.search(name)]
    if "gqa" in parts and "mha" in parts:
        parts.remove("mha")
    if "attention" in parts and len(parts) > 1:
        parts.remove("attention")
    return parts


def _part_rows(work: Path, shown: str) -> list[Row]:
    """Each class of the model files whose name matches a part, run through that part's checks (imported from
    ``work``, a copy; ``shown`` is the prefix that names the student's own file in a row)."""
    rows = []
    with _student_imports(work):
        for rel in MODEL_FILES:
            if not (work / rel).is_file():
                continue
            tree, failed = _parse(work, rel)
            if failed:
                continue
            modules = _module_classes(tree)
            classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
            unmatched = [name for name in modules if not part_for(name)]
            for name in classes:
                parts = part_for(name)
                if parts:
                    rows.append(_check_part(work, shown, rel, name, parts))
            if unmatched:
                rows.append(Row("WARN", f"{rel} by hand", f"no check part matches {', '.join(unmatched)}; if one is "
                                f"a part ({', '.join(PARTS)}), run `{_FIX_CHECK} PART {shown}{rel}:NAME`"))
    return rows


def _check_part(work: Path, shown: str, rel: str, name: str, parts: list[str]) -> Row:
    item, mine = f"{rel}:{name}", f"{shown}{rel}:{name}"
    by_hand = f"`{_FIX_CHECK} {parts[0]} {mine}`"
    if len(parts) > 1:
        return Row("WARN", item, f"its name could be {' or '.join(parts)}; run {by_hand} (or another of them)")
    part = parts[0]
    try:
        obj = load_target(f"{work / rel}:{name}")
    except (ValueError, OSError) as e:
        message = str(e).replace(f"{work}/", shown)
        if "raised ModuleNotFoundError" in message:  # a package not installed here, or a wrong import of theirs
            return Row("WARN", item, f"{message.partition('; ')[0]}; install that package, or fix the import if it "
                       f"is one of your files, then run {by_hand}")
        return Row("FAIL", item, message)
    try:
        report = PARTS[part](obj)
    except InterfaceError as e:
        return Row("WARN", item, f"does not fit the {part} interface ({e}); if it is another part, run "
                   f"`{_FIX_CHECK} PART {mine}`")
    except Exception as e:
        return Row("FAIL", item, f"{part}: the check raised {why(e)}; run {by_hand}")
    if report.passed:
        return Row("PASS", item, f"{part}: {len(report.findings)} of {len(report.findings)} checks pass")
    failed = next(f for f in report.findings if not f.passed)
    return Row("FAIL", item, f"{part}: {failed}; run {by_hand} for every check")


@contextlib.contextmanager
def _student_imports(work: Path):
    """While importing from ``work``: no bytecode written, ``work`` and ``work/src`` on sys.path (a student's
    file may import ``src.models.norm`` or ``models.norm``); afterwards every module imported from ``work`` is
    dropped from ``sys.modules`` and sys.path is as it was."""
    before, path, no_bytecode = set(sys.modules), list(sys.path), sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    sys.path[:0] = [str(work / "src"), str(work)]
    try:
        yield
    finally:
        sys.path[:] = path
        sys.dont_write_bytecode = no_bytecode
        here = str(work.resolve())
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            places = [getattr(module, "__file__", None) or "", *(getattr(module, "__path__", None) or [])]
            if any(str(Path(p).resolve()).startswith(here) for p in places if p):
                del sys.modules[name]


# --------------------------------------------------------------------------- README, train.py, Report.pdf

def _readme_rows(root: Path) -> list[Row]:
    readme = root / "README.md"
    if not readme.is_file():
        return []
    text = readme.read_text(encoding="utf-8", errors="replace")
    hf = next((m.group(0) for m in _HF_LINK.finditer(text) if m.group(1).split("/")[0] not in _HF_NOT_A_REPO), None)
    wandb = next((m.group(0) for m in _WANDB_LINK.finditer(text)), None)
    return [Row("PASS", "README.md: Hugging Face link", hf) if hf else
            Row("FAIL", "README.md: Hugging Face link", "none; add the link to your model's repository, "
                "https://huggingface.co/USER/REPO"),
            Row("PASS", "README.md: W&B link", wandb) if wandb else
            Row("FAIL", "README.md: W&B link", "none; add the link to your Weights & Biases project or run, "
                "https://wandb.ai/USER/PROJECT")]


def _wandb_rows(root: Path) -> list[Row]:
    if not (root / "src/train.py").is_file():
        return []
    tree, failed = _parse(root, "src/train.py")
    if failed:
        return []  # the syntax error has its row
    imported = any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "wandb" for a in n.names)
                   or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "wandb"
                   for n in ast.walk(tree))
    if imported:
        return [Row("PASS", "src/train.py: wandb", "imports wandb")]
    return [Row("WARN", "src/train.py: wandb", "does not import wandb; the handout asks for the training loop "
                "logged with Weights & Biases (import wandb; wandb.init(...); wandb.log(...))")]


def _report_rows(root: Path) -> list[Row]:
    pdf = root / "Report.pdf"
    if not pdf.is_file():
        return []
    unchecked = "the 12 pt font and 1-inch margins are not checked: check them yourself"
    try:
        from pypdf import PdfReader  # only here: the extra cipherlab[handin]
    except ImportError:
        return [Row("WARN", "Report.pdf: pages", "not checked: pypdf is not installed; "
                    "pip install 'cipherlab[handin]'")]
    quiet = logging.getLogger("pypdf")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # a slightly malformed PDF's warnings would break the table
    try:
        reader = PdfReader(pdf)
        if reader.is_encrypted and not reader.decrypt(""):
            return [Row("FAIL", "Report.pdf: pages", "password-protected; export it again without a password")]
        pages = len(reader.pages)
    except Exception as e:
        return [Row("FAIL", "Report.pdf: pages", f"pypdf cannot read it ({why(e)}); "
                    "export the report again as a PDF")]
    finally:
        quiet.setLevel(level)
    if pages == 0:
        return [Row("FAIL", "Report.pdf: pages", "no pages; export the report again")]
    if pages > MAX_PAGES:
        return [Row("FAIL", "Report.pdf: pages", f"{pages} pages, the handout allows at most {MAX_PAGES}: "
                    f"shorten it; {unchecked}")]
    return [Row("PASS", "Report.pdf: pages", f"{pages} page(s), at most {MAX_PAGES}; {unchecked}")]
