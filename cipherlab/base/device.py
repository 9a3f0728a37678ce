"""Which device to run on (CUDA when present, then Apple's MPS, then the CPU), and at what precision."""

from __future__ import annotations

import os

import torch


def pick_device(preference: str | torch.device | None = None) -> torch.device:
    """The device to use: ``preference`` ('cpu', 'cuda', 'cuda:1', 'mps') if given, else the best available.

    Raises ValueError when the requested device is not available here.
    """
    if preference:
        device = torch.device(preference)
        if device.type == "cuda" and not torch.cuda.is_available():
            hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
            raise ValueError(f"device {preference!r} requested but CUDA is not available on this machine" + (
                f" (CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU; unset it or name a GPU)"
                if hidden is not None and hidden.strip() in ("", "-1") else ""))
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError(f"device {preference!r} requested but MPS is not available on this machine")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device | str | None = None) -> str:
    """One line for a notebook's first cell, e.g. 'cpu (2 threads), torch 2.13.0+cpu'."""
    device = pick_device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"cuda: {name}, torch {torch.__version__}"
    if device.type == "mps":
        return f"mps (Apple GPU), torch {torch.__version__}"
    threads = torch.get_num_threads()
    return f"cpu ({threads} thread{'s' if threads != 1 else ''}), torch {torch.__version__}"


def autocast(device: torch.device | str, enabled: bool | None = None):
    """bf16 autocast, what training and decoding run under: on by default on CUDA only.

    On CPU and MPS the default is a no-op (full fp32). ``enabled=True`` turns it on for any
    device type, which is how the tests run the CUDA code path on a CPU
    (``torch.autocast("cpu", dtype=torch.bfloat16)``).
    """
    device_type = torch.device(device).type
    if enabled is None:
        enabled = device_type == "cuda"
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=enabled)


def fused_attention_on(device: torch.device | str, enabled: bool | None = None) -> bool:
    """Whether training on ``device`` runs attention through ``F.scaled_dot_product_attention``: with
    ``enabled=None``, on CUDA only, like bf16 autocast (:func:`autocast`); on a CPU the scratch maths runs,
    which is what every committed CPU result was measured with."""
    return torch.device(device).type == "cuda" if enabled is None else enabled
