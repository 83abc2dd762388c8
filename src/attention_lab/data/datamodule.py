"""LightningDataModule for the sentence tasks. Its training batches can resume mid-epoch: a resumed run sees
the same batches as an uninterrupted one, so that its final metrics are identical."""

from __future__ import annotations

import random

import lightning as L
import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset

from attention_lab.config import TaskConfig, typed
from attention_lab.data.corpus import Vocabulary, read_sentences
from attention_lab.data.tasks import build_task
from attention_lab.data.tensors import bos_first, padded
from attention_lab.data.train_size import with_training_inputs


class EpochShuffleSampler(Sampler[int]):
    """Shuffles like ``shuffle=True``, but the order of epoch e depends only on (seed, e), and a restored state
    skips the samples the interrupted run had already drawn in that epoch."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed, self.epoch = size, seed, 0
        self.consumed = 0  # samples drawn in the current epoch
        self.resume_at: tuple[int, int] | None = None  # (epoch, samples to skip) from a checkpoint

    def set_epoch(self, epoch: int) -> None:  # called by Lightning before each epoch
        self.epoch = epoch

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(self.size, generator=generator).tolist()
        skip = self.resume_at[1] if self.resume_at is not None and self.resume_at[0] == self.epoch else 0
        self.resume_at = None
        self.consumed = skip
        for index in order[skip:]:
            self.consumed += 1
            yield index


class ResumableDataLoader(DataLoader):
    """A DataLoader with state_dict/load_state_dict: Lightning stores its position in every checkpoint."""

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.sampler.epoch, "consumed": self.sampler.consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state:
            self.sampler.resume_at = (int(state["epoch"]), int(state["consumed"]))


class SentenceTaskDataModule(L.LightningDataModule):
    """Reads the corpus and builds the vocabulary at construction (the model needs its size), the data in
    setup()."""

    def __init__(self, task: TaskConfig | dict, *, batch_size: int = 64, seed: int = 0,
                 max_steps: int | None = None) -> None:
        """``max_steps``: the run's, which task.train_size=null reads (:mod:`attention_lab.data.train_size`)."""
        super().__init__()
        typed_task = task if isinstance(task, TaskConfig) else typed(TaskConfig, task)
        self.task = with_training_inputs(typed_task, max_steps, batch_size)
        self.batch_size, self.seed = batch_size, seed
        self.sentences = read_sentences(self.task.corpus)
        self.vocab = Vocabulary.for_task(self.sentences, self.task.words, bos=self.task.bos)
        self.train_set: TensorDataset | None = None
        self.val_set: TensorDataset | None = None
        self.ood_set: TensorDataset | None = None  # longer inputs (task.ood_min_len..task.ood_max_len), or None

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        task = build_task(self.task.name)
        train, val = task.tensors(self.vocab, self.sentences, self.task, random.Random(self.seed))
        # Its own random stream: turning it on leaves the training and validation data as they were.
        ood_pairs = task.ood_pairs(self.vocab, self.sentences, self.task, random.Random(f"{self.seed}/ood"))
        ood = padded(ood_pairs, self.task.ood_max_len) if ood_pairs else None
        if self.task.bos:
            train, val = bos_first(train), bos_first(val)
            ood = bos_first(ood) if ood is not None else None
        self.train_set, self.val_set = TensorDataset(*train), TensorDataset(*val)
        if ood is not None:
            self.ood_set = TensorDataset(*ood)

    def train_dataloader(self) -> DataLoader:
        if self.trainer is not None and self.trainer.world_size > 1:  # Lightning's distributed sampler
            return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(self.seed))
        # Own generator: creating the iterator then draws nothing from the global RNG.
        return ResumableDataLoader(self.train_set, batch_size=self.batch_size,
                                   sampler=EpochShuffleSampler(len(self.train_set), self.seed),
                                   generator=torch.Generator().manual_seed(self.seed))

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """The validation set, then (when task.ood_min_len..task.ood_max_len is set) the longer one."""
        val = DataLoader(self.val_set, batch_size=max(self.batch_size, 256))
        if self.ood_set is None:
            return val
        return [val, DataLoader(self.ood_set, batch_size=max(self.batch_size, 256))]
