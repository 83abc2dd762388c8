"""attention-lab: attention mechanisms from the notebooks, as a configurable lab."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# What `import attention_lab` offers, imported when first used: importing the package stays cheap (no torch), as
# every script's start and every config check imports it.
LAZY = {"load_run": "attention_lab.records.trained_run"}
__all__ = ["__version__", *LAZY]


def __getattr__(name: str) -> Any:
    if name in LAZY:
        import importlib

        return getattr(importlib.import_module(LAZY[name]), name)
    raise AttributeError(f"module 'attention_lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *LAZY})
