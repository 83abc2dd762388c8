"""Checkpoints written by the tests as torch.save writes the lab's (``hyper_parameters`` with the model config and the
vocabulary, the weights under ``model.`` in ``state_dict``), with the weights and archive a test chooses: a model's
own initial weights, or crafted ones that make a small file describe a large model. And the peak memory that some
work adds to this process, which tracemalloc does not see for torch's allocations."""

from __future__ import annotations

import contextlib
import copy
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

MB = 2**20


def vocabulary(size: int) -> list[str]:
    """``size`` words: <pad> and <unk> (ids 0 and 1, as the lab's corpus numbers them), then w0, w1, ..."""
    return ["<pad>", "<unk>", *(f"w{i}" for i in range(size - 2))]


def model_config(mlp: bool = True, **fields) -> dict:
    """A small multihead model's config as a checkpoint's hparams hold it, with ``fields`` changed; ``mlp=False``:
    blocks without their MLP (4 x d_model wide)."""
    from attention_lab.config import ModelConfig

    values = {"name": "multihead", "d_model": 16, "num_heads": 2, "layers": 1, "context_length": 16, **fields}
    config = ModelConfig(**values).to_dict()
    config["block"]["mlp"] = mlp
    return config


def shapes(model: dict, vocab: list[str]) -> dict:
    """The state_dict names (with ``model.``) and shapes of the model, described on the meta device."""
    import torch

    from attention_lab.model import WEIGHTS_PREFIX, TrainedModel

    with torch.device("meta"):
        weights = TrainedModel(model, vocab).model.state_dict()
    return {WEIGHTS_PREFIX + name: tensor.shape for name, tensor in weights.items()}


def genuine_weights(model: dict, vocab: list[str]) -> dict:
    """The model's own initial weights, every number stored."""
    import torch

    from attention_lab.model import WEIGHTS_PREFIX, TrainedModel

    torch.manual_seed(0)
    return {WEIGHTS_PREFIX + name: tensor for name, tensor in TrainedModel(model, vocab).model.state_dict().items()}


def unbacked_weights(model: dict, vocab: list[str], kind: str) -> dict:
    """Weights of the right shapes that store far fewer numbers than they have: ``stride0``, views of one stored
    number; ``overlapping``, rows that start one number apart in a storage of rows + columns numbers; ``meta``,
    tensors of the meta device (shapes without storage); ``shared``, every weight a view of the start of one storage,
    as large as the largest weight."""
    import torch

    named = shapes(model, vocab)
    shared = torch.zeros(max(shape.numel() for shape in named.values()))

    def crafted(shape):
        if kind == "stride0":
            return torch.zeros(1).expand(shape)
        if kind == "meta":
            return torch.empty(shape, device="meta")
        if kind == "shared":
            return shared[:shape.numel()].view(shape)
        return torch.zeros(sum(shape)).as_strided(shape, (1,) * len(shape))

    return {name: crafted(shape) for name, shape in named.items()}


def write_checkpoint(run_dir: Path, model: dict, vocab: list[str], weights: dict, **fields) -> Path:
    """``<run_dir>/checkpoints/last.ckpt`` holding ``weights`` as its state_dict; ``fields``: other top-level
    entries (``global_step`` is 1 unless given)."""
    import torch

    path = run_dir / "checkpoints" / "last.ckpt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": weights, "global_step": 1, "hyper_parameters": {"model": model, "vocab": vocab},
                **fields}, path)
    return path


def rewrite_archive(path: Path, *, deflate: bool = False, share_equal_records: bool = False) -> None:
    """The zip archive at ``path`` written again: ``deflate``, every record compressed (torch.load reads them);
    ``share_equal_records``, a record whose bytes equal an earlier one's is not written again but pointed at that
    one's (records overlapping in the file: torch.load reads each in full)."""
    with zipfile.ZipFile(path) as source:
        records = [(info, source.read(info.filename)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as target:
        written: dict[bytes, zipfile.ZipInfo] = {}
        for info, data in records:
            if share_equal_records and data in written:
                alias = copy.copy(written[data])  # the same offset, sizes and checksum, under this record's name
                alias.filename = alias.orig_filename = info.filename
                target.filelist.append(alias)
                target.NameToInfo[info.filename] = alias
                continue
            fresh = zipfile.ZipInfo(info.filename, info.date_time)
            fresh.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            target.writestr(fresh, data)
            written.setdefault(data, target.getinfo(info.filename))


def status_mb(key: str, pid: str = "self") -> float:
    """A memory line of ``/proc/<pid>/status`` (VmRSS: resident now; VmHWM: its peak; RssAnon: what the process
    allocated, resident now, without the pages of its libraries' code), in MB."""
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith(f"{key}:"))
    return int(line.split()[1]) / 1024


def reset_peak(pid: str = "self") -> None:
    """Process ``pid``'s peak resident memory (VmHWM) reset to its current size, as Linux does when 5 is written to
    its clear_refs (the test is skipped where that cannot be done)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pytest.skip("needs Linux's /proc/<pid>/clear_refs to measure peak memory")


@contextlib.contextmanager
def peak_growth() -> Iterator[dict]:
    """``{"mb": ...}``, after the block: the most resident memory the block added to this process (its peak after
    :func:`reset_peak`): torch allocates outside Python's allocator, where tracemalloc does not look. The peak counts the pages of torch's code that the block
    runs for the first time too (tens of MB): measure work that has run once before."""
    reset_peak()
    measured = {"before": status_mb("VmRSS")}
    yield measured
    measured["mb"] = status_mb("VmHWM") - measured["before"]
