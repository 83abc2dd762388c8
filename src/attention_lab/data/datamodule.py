"""LightningDataModule for the sentence tasks."""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from attention_lab.data.corpus import Vocabulary, read_sentences
from attention_lab.data.tasks import build_pairs, to_tensors


class SentenceTaskDataModule(L.LightningDataModule):
    """Builds the vocabulary at construction (the model needs its size) and the data in setup()."""

    def __init__(self, name: str, *, corpus: str | None = None, min_len: int = 3, max_len: int = 8,
                 train_size: int = 4000, val_size: int = 500, batch_size: int = 64, seed: int = 0) -> None:
        super().__init__()
        self.name, self.min_len, self.max_len = name, min_len, max_len
        self.train_size, self.val_size = train_size, val_size
        self.batch_size, self.seed = batch_size, seed
        self.sentences = read_sentences(corpus)
        self.vocab = Vocabulary.from_sentences(self.sentences)
        self.train_set: TensorDataset | None = None
        self.val_set: TensorDataset | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        train, val = build_pairs(self.name, self.vocab, self.sentences, train_size=self.train_size,
                                 val_size=self.val_size, min_len=self.min_len, max_len=self.max_len, seed=self.seed)
        self.train_set = TensorDataset(*to_tensors(train, self.max_len))
        self.val_set = TensorDataset(*to_tensors(val, self.max_len))

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True, generator=generator)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=max(self.batch_size, 256))
