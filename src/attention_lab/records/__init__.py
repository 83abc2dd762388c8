"""What a run dir and a sweep dir hold: the one contract between what writes them (``train``, ``callbacks/``,
``run/``) and what reads them (``review/``, the attention tab, the offline snapshot, ``load_run``). Writers and
readers meet here and import nothing of each other.

The file names and atomic writes, records read as data within bounds, checkpoints and the bounds a model loaded
from one must keep, the run record (``run_info.json``), metrics.json's order, the HParams table, the tensors and
names the tab reads, text escaped for each place it is shown, and the ``next:`` command lines.
"""
