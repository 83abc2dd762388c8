"""How large a model the review tools and the attention tab build from a checkpoint, checked on what the file
really stores before anything of the model's size is allocated.

A checkpoint is data from anywhere: its hparams declare the model's shape and its ``state_dict`` holds the weights,
and neither is trusted to say what the model costs. In the order :func:`check_checkpoint` and its caller
(:func:`attention_lab.records.trained_run.load_module`) apply them:

- the archive (:func:`check_archive`, before ``torch.load``): torch.save stores its records uncompressed, one after
  another, so what loading allocates is at most the file's size. A compressed record, or records that together
  claim more bytes than the file holds (records overlapping in the file), would make a file of kilobytes load as
  gigabytes;
- the dimensions the hparams declare (:func:`check_dimensions`), before the model is even described on PyTorch's
  meta device: describing a model costs time per block and head even there (64 layers x 64 heads of
  ``multihead_concat``: 1.4 s; 256 x 256: half a minute);
- the weights (:func:`stored_numbers`): each a CPU tensor backed by as many stored numbers as it has (a stride of
  0, or rows that overlap, make one stored number look like millions; a meta tensor stores none), each storage
  counted once however many weights view it;
- the model the hparams declare (:func:`declared_numbers`) may hold at most :data:`MAX_BUILT_NUMBERS` numbers
  beyond those stored.

Nothing here imports torch at import time: the review tools answer ``--help`` and a wrong path without it.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

# The largest model a checkpoint may describe. The lab's own models are far inside (2 layers x 4 heads, d_model 48,
# a vocabulary of a few hundred words); these bound what a crafted hparams dict costs before its weights are read.
MAX_LAYERS = 256  # blocks (model.layers, or the length of model.mixers)
MAX_HEADS = 256  # model.num_heads
MAX_LAYER_HEADS = 4096  # layers x heads: what describing the model costs, per head, even on the meta device
MAX_D_MODEL = 4096
MAX_CONTEXT = 1 << 16  # model.context_length
MAX_VOCAB = 1 << 17  # words of the vocabulary: the columns of a word table, the rows of the embedding
# Numbers a checkpoint's model may build beyond those the file stores: tables computed when it is built (the
# sinusoidal positions, context_length x d_model), for any context a sentence could fill.
MAX_BUILT_NUMBERS = 1 << 22


class RefusedCheckpoint(ValueError):
    """A checkpoint the lab does not build a model from; ``problem`` is the one line that says why."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class BeyondBound(RefusedCheckpoint):
    """A size the checkpoint declares beyond one of this module's bounds: ``setting`` names it (``model.layers``),
    ``size`` and ``limit`` are the numbers."""

    def __init__(self, setting: str, size: int, limit: int) -> None:
        super().__init__(f"its hyper-parameters declare {setting}={size}, more than the {limit} the lab builds "
                         "a model of")
        self.setting, self.size, self.limit = setting, size, limit


def check_archive(path: Path) -> None:
    """The records of the zip archive at ``path`` stored uncompressed and, together, no larger than the file: what
    ``torch.load`` allocates for them is then at most the file's own size. Read from the archive's directory only."""
    size = path.stat().st_size
    with zipfile.ZipFile(path) as archive:
        records = archive.infolist()
    compressed = next((record for record in records if record.compress_type != zipfile.ZIP_STORED), None)
    if compressed is not None:
        raise RefusedCheckpoint(f"its record {compressed.filename} is compressed (torch.save stores its records as "
                                "they are): refused before loading, as it could hold far more than the file's size")
    claimed = sum(record.file_size for record in records)
    if claimed > size:
        raise RefusedCheckpoint(f"its records claim {claimed:,} bytes but the file holds {size:,} (records that "
                                "overlap): refused before loading")


def check_dimensions(config: Any, vocab_size: int) -> None:
    """Raises BeyondBound where the :class:`~attention_lab.config.ModelConfig` ``config`` or the vocabulary is beyond
    this module's bounds (a size below 1 is left to the model's own checks, which are cheap)."""
    layers = max(config.layers, len(config.mixers or ()))
    for setting, size, limit in (("model.layers", layers, MAX_LAYERS), ("model.num_heads", config.num_heads, MAX_HEADS),
                                 ("model.layers x model.num_heads", layers * config.num_heads, MAX_LAYER_HEADS),
                                 ("model.d_model", config.d_model, MAX_D_MODEL),
                                 ("model.context_length", config.context_length, MAX_CONTEXT),
                                 ("a vocabulary of words", vocab_size, MAX_VOCAB)):
        if size > limit:
            raise BeyondBound(setting, size, limit)


def stored_numbers(weights: dict[str, Any]) -> int:
    """The numbers that the tensors ``weights`` (name -> tensor) really store, each storage counted once. Raises
    RefusedCheckpoint, naming the weight, for one that is not a dense CPU tensor or that its storage does not
    back number for number (strides of 0 or overlapping, or reaching beyond the storage)."""
    import torch

    storages: dict[int, int] = {}  # a storage's address -> its numbers
    for name, tensor in weights.items():
        if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided or tensor.device.type != "cpu":
            raise RefusedCheckpoint(f"its weight {name} is not a tensor of stored numbers")
        if tensor.numel() == 0:
            continue
        storage = tensor.untyped_storage()
        reach = check_backed(name, tensor.shape, tensor.stride())
        if (tensor.storage_offset() + reach) * tensor.element_size() > storage.nbytes():
            raise RefusedCheckpoint(f"its weight {name} reaches beyond the numbers stored for it")
        storages[storage.data_ptr()] = storage.nbytes() // tensor.element_size()
    return sum(storages.values())


def check_backed(name: str, shape, strides) -> int:
    """How many consecutive numbers of its storage a tensor of ``shape`` and ``strides`` spans, where each of its
    numbers has a place of its own there (each stride, smallest first, steps past everything the smaller ones
    span); RefusedCheckpoint otherwise: a stride of 0 or rows that overlap make few stored numbers look like many."""
    span = 1
    for stride, size in sorted((stride, size) for size, stride in zip(shape, strides, strict=True) if size > 1):
        if stride < span:
            raise RefusedCheckpoint(f"its weight {name} ({'x'.join(map(str, shape))}) is not backed by a stored "
                                    f"number for each of its numbers (strides {tuple(strides)}): refused before "
                                    "building a model of it")
        span += stride * (size - 1)
    return span


def declared_numbers(model: Any, vocab_size: int) -> int:
    """How many numbers (parameters and buffers) the model of these hyper-parameters (a ModelConfig or its dict)
    holds, counted on PyTorch's meta device: nothing of that size is allocated."""
    import torch

    from attention_lab.config import ModelConfig
    from attention_lab.model import SequenceModel

    config = model if isinstance(model, ModelConfig) else ModelConfig.from_dict(model)
    with torch.device("meta"):
        declared = SequenceModel(config, vocab_size)
    return sum(tensor.numel() for tensor in (*declared.parameters(), *declared.buffers()))


def check_checkpoint(checkpoint: dict) -> None:
    """The bounds above for a checkpoint loaded as data (``weights_only=True``) whose hparams hold ``model`` and
    ``vocab``: raises RefusedCheckpoint (BeyondBound for a dimension) before its model is built."""
    from attention_lab.config import ModelConfig
    from attention_lab.model import WEIGHTS_PREFIX

    hparams, state = checkpoint["hyper_parameters"], checkpoint.get("state_dict")
    if not isinstance(state, dict):
        raise RefusedCheckpoint("it holds no state_dict of weights")
    vocab_size = len(hparams["vocab"])
    config = ModelConfig.from_dict(hparams["model"])
    check_dimensions(config, vocab_size)
    stored = stored_numbers({name: tensor for name, tensor in state.items()
                             if isinstance(name, str) and name.startswith(WEIGHTS_PREFIX)})
    declared = declared_numbers(config, vocab_size)
    if declared > stored + MAX_BUILT_NUMBERS:
        raise RefusedCheckpoint(f"its hyper-parameters declare a model of {declared:,} numbers but it stores "
                                f"{stored:,}; refused before building it")
