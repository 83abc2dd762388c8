"""The worked examples of the five reference notebooks, recomputed with the attention library.

Each :class:`Example` holds a number the notebook printed (copied here as a literal: the project
never reads the notebooks at run time) and a function that computes the same quantity with
:func:`~attention_lab.attention.build_attention` / :func:`~attention_lab.attention.attend`
under the notebook's seeds. ``scripts/reproduce.py`` prints them side by side and
``tests/notebooks/test_golden.py`` checks every one. One module per notebook, each with its ``NOTEBOOK``
number, ``TITLE`` and ``EXAMPLES``:

* ``notebook_000`` - "Self-attention from scratch" (S. Raschka's blog, as a notebook): "Life is
  short, eat dessert first", d_q = d_k = 24, d_v = 28, torch.rand weights under seed 123.
* ``notebook_001`` - "Attention in Transformers" (StatQuest style): 2-d encodings of three tokens,
  seed 42; self, masked self, encoder-decoder and multi-head attention.
* ``notebook_002`` - "Attention from scratch" in NumPy: integer weights from ``np.random.randint`` (seed 42).
* ``notebook_003`` - "Build an LLM from scratch" ch. 3: "Your journey starts with one step"; attention
  without weights, then with torch.rand weights (seed 42) and nn.Linear weights (seed 42).
* ``notebook_004`` - the 000 computation again, then three heads of torch.rand weights (only shapes printed).
"""

import torch

from attention_lab.notebooks import notebook_000, notebook_001, notebook_002, notebook_003, notebook_004
from attention_lab.notebooks.example import Comparison, Example, as_array, compare

NOTEBOOK_MODULES = (notebook_000, notebook_001, notebook_002, notebook_003, notebook_004)
NOTEBOOKS: dict[str, str] = {module.NOTEBOOK: module.TITLE for module in NOTEBOOK_MODULES}
EXAMPLES: list[Example] = [example for module in NOTEBOOK_MODULES for example in module.EXAMPLES]


def examples_for(notebook: str | None = None) -> list[Example]:
    """All examples, or those of one notebook ("000".."004")."""
    return [e for e in EXAMPLES if notebook is None or e.notebook == notebook]


def compare_all(notebook: str | None = None) -> list[Comparison]:
    with torch.no_grad():
        return [compare(example) for example in examples_for(notebook)]


__all__ = ["EXAMPLES", "NOTEBOOKS", "Comparison", "Example", "as_array", "compare", "compare_all", "examples_for"]
