"""A task's examples as the datamodule holds them: (inputs, targets) int64 tensors of one length, <pad>-padded at the
end (the loss ignores <pad> targets), and <bos> before every input when task.bos asks for it."""

from __future__ import annotations

import torch

from attention_lab.data.corpus import BOS_ID, PAD_ID

Examples = tuple[torch.Tensor, torch.Tensor]  # (inputs, targets), each (N, length)


def padded(pairs: list[tuple[list[int], list[int]]], length: int) -> Examples:
    """Lists of ids (a task's ``pairs``) as (N, length) tensors, PAD_ID after each one's end."""
    inputs = torch.full((len(pairs), length), PAD_ID, dtype=torch.long)
    targets = torch.full((len(pairs), length), PAD_ID, dtype=torch.long)
    for row, (src, tgt) in enumerate(pairs):
        inputs[row, :len(src)] = torch.tensor(src, dtype=torch.long)
        targets[row, :len(tgt)] = torch.tensor(tgt, dtype=torch.long)
    return inputs, targets


def bos_first(examples: Examples) -> Examples:
    """<bos> before every input, PAD (ignored by the loss) as its target: every other position keeps its target, so
    each task's targets stay aligned with their inputs whatever they are (next word, copy, recall)."""
    inputs, targets = examples
    column = torch.full((inputs.shape[0], 1), BOS_ID, dtype=torch.long)
    return torch.cat([column, inputs], dim=1), torch.cat([torch.full_like(column, PAD_ID), targets], dim=1)
