"""The second numerical conditions under which every chapter must print what it stored (``make numerics``).

A chapter's stored outputs are compared on every machine that runs the tests, so a number in them may
not depend on the machine's arithmetic (CONTRIBUTING.md, "Which outputs are stored and compared").
``book/conftest.py`` applies a variant named by ``CIPHERLAB_NUMERICS`` to each chapter's kernel and runs
:data:`PRELUDE` before each cell; ``tools/numerics.py`` runs the chapters, and the tests that recompute
the prose's facts, once per variant and lists what changed.
"""

from __future__ import annotations

import os

# The second numerical conditions of `make numerics`, by name: the kernel's environment (PyTorch's
# vectorised kernels and MKL's code path forced to those of another CPU, two threads instead of one), and
# the seed every global generator gets before each cell. ATen and MKL read these variables when the
# kernel starts. OMP_WAIT_POLICY=PASSIVE changes no number: it keeps two OpenMP threads from spinning
# against each other when another process holds a core (measured: a 1-minute cell took over 15).
NUMERICS = {
    "avx2": {"env": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OMP_NUM_THREADS": "2",
                     "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
             "threads": 2, "seed": 20261206},
    "nosimd": {"env": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                       "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2",
                       "OMP_WAIT_POLICY": "PASSIVE"},
               "threads": 2, "seed": 987654321},
}
# Run in the kernel before each cell under a variant (its messages are not the cell's: nbval keeps only
# the outputs of the cell's own request). It leaves no name behind in the chapter's namespace.
PRELUDE = """
def _cipherlab_numerics(seed, threads):
    import random, sys
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.manual_seed(seed)
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(True, warn_only=True)
_cipherlab_numerics({seed}, {threads})
del _cipherlab_numerics
"""


def variant(name: str | None = None) -> dict | None:
    """The variant ``name`` (default: the environment's ``CIPHERLAB_NUMERICS``), or None when none is named;
    an unknown name is a ValueError listing the choices."""
    name = (os.environ.get("CIPHERLAB_NUMERICS", "") if name is None else name).strip()
    if not name:
        return None
    if name not in NUMERICS:
        raise ValueError(f"CIPHERLAB_NUMERICS={name}: no such variant; choose one of {', '.join(NUMERICS)}")
    return NUMERICS[name]
