"""The least memory a run needs, from its config, against the memory of the machine that is to train it: a run that
cannot fit is refused before its dir exists (:mod:`attention_lab.run.preflight`), in one line that names the
setting and what fits, instead of failing (or swapping for hours) after its data or its model was half built.

Every estimate is a lower bound, so that no run that fits is refused:

- the model's parameters, counted on PyTorch's meta device (nothing allocated), at 8 bytes each (a float32
  weight and its gradient), and 8 more for Adam's and AdamW's two moments (the lab's optimizer);
- one batch's activations: every layer keeps at least its input (batch × task.max_len × d_model float32 numbers)
  for the backward pass;
- the task's examples, in the process's memory: inputs and targets as int64, padded to task.max_len (the
  longer validation set's to task.ood_max_len). Building them in Python takes several times more.

The model and its activations live on the accelerator (a GPU's own memory; the CPU's and MPS's are the
machine's), the examples in the machine's memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from attention_lab.config import ModelConfig, TaskConfig
from attention_lab.errors import ConfigError

FLOAT_BYTES = 4
# The float32 numbers an optimizer keeps per parameter (Adam's exp_avg and exp_avg_sq); any other: none counted.
OPTIMIZER_STATES = {"torch.optim.AdamW": 2, "torch.optim.Adam": 2}
TOKEN_BYTES = 8  # int64 ids
GB = 1e9


@dataclass(frozen=True)
class ParameterCount:
    """The model's parameters as ``fixed + per_layer × layers + per_word × vocabulary size`` (exact: the model is
    linear in both)."""

    fixed: int
    per_layer: int
    per_word: int

    def total(self, layers: int, vocab_size: int) -> int:
        return self.fixed + self.per_layer * layers + self.per_word * vocab_size


def count_parameters(model: ModelConfig) -> ParameterCount:
    """The parameters of the model ``model`` describes, from three small copies built on the meta device."""
    import torch

    from attention_lab.model import SequenceModel

    def count(layers: int, vocab_size: int) -> int:
        with torch.device("meta"):
            built = SequenceModel(replace(model, layers=layers), vocab_size)
        return sum(p.numel() for p in built.parameters())

    base = count(1, 1)
    per_layer, per_word = count(2, 1) - base, count(1, 2) - base
    return ParameterCount(base - per_layer - per_word, per_layer, per_word)


def machine_memory() -> int:
    """Bytes of memory this machine has (all of it, not what is free now: the bound must not depend on the load)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def gpu_memory() -> int:
    """Bytes of memory of the smallest visible GPU: under data parallelism each holds a whole copy of the model."""
    import torch

    return min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count()))


def gigabytes(size: float) -> str:
    return f"{size / GB:,.1f} GB"


def example_bytes(task: TaskConfig) -> int:
    """The task's examples as the data module holds them (inputs and targets, padded)."""
    positions = task.max_len * (task.train_size + task.val_size)
    if task.ood_min_len is not None and task.ood_max_len is not None:
        positions += task.ood_max_len * task.val_size
    return 2 * TOKEN_BYTES * positions


def check_data_fits(task: TaskConfig, memory: int) -> None:
    need = example_bytes(task)
    if need <= memory:
        return
    key, value = ("task.train_size", task.train_size) if task.train_size >= task.val_size else ("task.val_size",
                                                                                               task.val_size)
    fitting = memory // (2 * TOKEN_BYTES * task.max_len)
    raise ConfigError(f"{key}={value} is invalid: the examples (task.train_size + task.val_size = "
                      f"{task.train_size + task.val_size}, task.max_len={task.max_len}) take at least {gigabytes(need)} "
                      f"as tensors, more than this machine's {gigabytes(memory)} of memory; at most about {fitting} "
                      "examples fit")


def bytes_per_parameter(optimizer: str) -> int:
    """What training keeps per parameter with the optimizer ``optimizer`` (its ``_target_``)."""
    return FLOAT_BYTES * (2 + OPTIMIZER_STATES.get(optimizer, 0))


def check_model_fits(model: ModelConfig, vocab_size: int, batch_size: int, task: TaskConfig, per_parameter: int,
                     memory: int, where: str) -> None:
    """``per_parameter``: bytes per parameter (:func:`bytes_per_parameter`); ``memory``: the bytes ``where`` (a phrase:
    "the GPU has") holds for the model and its activations."""
    counted = count_parameters(model)
    batch = min(batch_size, task.train_size)  # a batch is at most the training set
    per_layer_weights = per_parameter * counted.per_layer
    per_layer_activations = FLOAT_BYTES * batch * task.max_len * model.d_model
    fixed = per_parameter * (counted.fixed + counted.per_word * vocab_size)
    need = fixed + (per_layer_weights + per_layer_activations) * model.layers
    if need <= memory:
        return
    what = (f"the model ({counted.total(model.layers, vocab_size):.3g} parameters, at {per_parameter} bytes each to "
            f"train) and one batch's activations take at least {gigabytes(need)}, more than the {gigabytes(memory)} "
            f"{where}")
    fitting_layers = (memory - fixed) // (per_layer_weights + per_layer_activations)
    if fitting_layers < 1:
        raise ConfigError(f"d_model={model.d_model} is invalid: not even one layer fits: {what}; use a smaller "
                          "d_model")
    if per_layer_activations > per_layer_weights:
        raise ConfigError(f"batch_size={batch_size} is invalid with layers={model.layers}: {what}; at most "
                          f"{fitting_layers} layers fit at this batch_size, or use a smaller one")
    raise ConfigError(f"layers={model.layers} is invalid: {what}; at most {fitting_layers} layers fit at "
                      f"d_model={model.d_model}")


def check_fits(model: ModelConfig, task: TaskConfig, vocab_size: int, batch_size: int, optimizer: str,
               accelerator: str) -> None:
    """Raises ConfigError when the run cannot fit in memory; the examples are checked first (the model needs them
    built). ``optimizer``: the ``_target_`` of the run's optimizer."""
    memory = machine_memory()
    check_data_fits(task, memory)
    sizes = (model, vocab_size, batch_size, task, bytes_per_parameter(optimizer))
    if accelerator == "gpu":
        check_model_fits(*sizes, gpu_memory(), "the GPU has")
    else:  # the model shares the machine's memory with the examples
        check_model_fits(*sizes, memory - example_bytes(task), "this machine has beside the examples")
