"""The commands ``python -m cipherlab check PART FILE.py:NAME`` and ``python -m cipherlab check handin PATH``.

The checks are :mod:`cipherlab.student.check`'s (:data:`~cipherlab.student.check.PARTS`, by name); here the
command loads NAME from FILE.py, prints one line per check and exits 0 when every check passes, 1 otherwise.
``handin`` takes the place of a part: it checks a whole course hand-in, a folder or its zip
(:func:`cipherlab.student.handin.check_handin`), prints one line per item and exits 1 on any FAIL.

The student's code runs under three guards: the checks of a part end within :data:`CHECK_TIME_LIMIT_S`
seconds (a forward pass that never returns is stopped, naming the check it was in); a part that changed
PyTorch's global settings and left them so (``torch.set_default_dtype``, ``torch.set_grad_enabled``) is
named after its report, the settings put back; and an exception raised in the student's file outside a
check is the student's, with its line (:func:`cipherlab.runner.errors.register_student_code`). A thread
the part left running does not keep the command from ending (:func:`cipherlab.runner.errors.run_command`).
"""

from __future__ import annotations

from cipherlab.runner.errors import register_student_code
from cipherlab.student.check import PARTS, InterfaceError, load_target
from cipherlab.student.check import report as check_report
from cipherlab.student.handin import check_handin
from cipherlab.student.trials import TooLong, state_change, time_limit, torch_state

__all__ = ["CHECK_TIME_LIMIT_S", "register_cli"]


HANDIN = "handin"  # in the place of PART: the target is a hand-in folder or zip, not FILE.py:NAME

CHECK_TIME_LIMIT_S = 300.0
"""Seconds the checks of one part may take (a few seconds as a rule; BPE's speed check and ``decoding`` up to a
minute on a slow machine): past it, the code running is stopped and the check it was in named."""


def _cmd_check(args) -> int:
    if args.part == HANDIN:
        report = check_handin(args.target)
        print(report)
        return 0 if report.passed else 1
    obj = load_target(args.target)
    file, _, name = args.target.rpartition(":")
    register_student_code(file, args.part, name)  # an exception raised in it is the student's, with its line
    check_report.RUNNING[0] = ""
    before = torch_state()
    try:
        with time_limit(CHECK_TIME_LIMIT_S):
            report = PARTS[args.part](obj)
    except InterfaceError as e:
        raise ValueError(f"{args.target}: {e}") from None
    except TooLong:
        during = (f"in the check {check_report.RUNNING[0]!r}" if check_report.RUNNING[0]
                  else "while building and calling it as its interface says, before the first check")
        raise ValueError(f"check {args.part} {args.target}: did not end within {CHECK_TIME_LIMIT_S:g} s and was "
                         f"stopped {during}: a loop that never ends in your code, or code far slower than it need "
                         "be?") from None
    finally:
        change = state_change(before)  # put back whatever happens
    print(report)
    if change:
        raise ValueError(f"check {args.part} {args.target}: your code {change}; the checks ran with it changed, so "
                         "fix that and check again")
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
