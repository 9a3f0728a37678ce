"""The commands ``python -m cipherlab check PART FILE.py:NAME`` and ``python -m cipherlab check handin PATH``.

The checks are :mod:`cipherlab.student.check`'s (:data:`~cipherlab.student.check.PARTS`, by name); here the
command loads NAME from FILE.py, prints one line per check and exits 0 when every check passes, 1 otherwise.
``handin`` takes the place of a part: it checks a whole course hand-in, a folder or its zip
(:func:`cipherlab.student.handin.check_handin`), prints one line per item and exits 1 on any FAIL.
"""

from __future__ import annotations

from cipherlab.student.check import PARTS, InterfaceError, load_target
from cipherlab.student.handin import check_handin

__all__ = ["register_cli"]


HANDIN = "handin"  # in the place of PART: the target is a hand-in folder or zip, not FILE.py:NAME


def _cmd_check(args) -> int:
    if args.part == HANDIN:
        report = check_handin(args.target)
        print(report)
        return 0 if report.passed else 1
    obj = load_target(args.target)
    try:
        report = PARTS[args.part](obj)
    except InterfaceError as e:
        raise ValueError(f"{args.target}: {e}") from None
    print(report)
    return 0 if report.passed else 1


def register_cli(subparsers) -> None:
    """Add ``python -m cipherlab check``."""
    p = subparsers.add_parser(
        "check",
        help="check your own attention, norm, positions, BPE, BLT parts or decoding against cipherlab's",
        description="Load NAME from FILE.py and check it against cipherlab's reference module and PyTorch's own "
        "(F.scaled_dot_product_attention, nn.MultiheadAttention, nn.LayerNorm, nn.RMSNorm): shapes, dtypes "
        "(bfloat16 too), masks (True = blocked), causality, invariances, RoPE's relative property, the KV cache; "
        "BPE merges against a textbook loop, pre-token boundaries, round trips and speed; the BLT's patcher, "
        "pooling and patch-causal mask; a whole model's cached decoding against full passes. One line per check; "
        "exit 0 when all pass. The interface of each part: help(cipherlab.student.check.PART). "
        "`check handin PATH` checks a whole hand-in, its folder or <rollnumber>_assignment1.zip: the layout, "
        "no ready-made nn.Transformer*/nn.MultiheadAttention, each part class of src/models/ through its part's "
        "checks, the README's Hugging Face and W&B links, Report.pdf's pages (pip install 'cipherlab[handin]'); "
        "one line per item, exit 1 on any FAIL.",
    )
    p.add_argument("part", choices=[*PARTS, HANDIN], help="the part NAME implements, or handin for a whole hand-in")
    p.add_argument("target", metavar="FILE.py:NAME",
                   help="your file and the class or function in it; after handin, your hand-in folder or zip")
    p.set_defaults(func=_cmd_check)
