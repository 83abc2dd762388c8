"""LightningModule: trains a SequenceModel on a sentence task and logs its metrics."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from attention_lab.data.corpus import PAD_ID, UNK_ID
from attention_lab.model import SequenceModel


def attention_entropy(weights: Tensor, query_mask: Tensor) -> Tensor:
    """Mean entropy (nats) of each head's attention rows over real queries: (B, H, T, T) -> (H,).
    Low entropy = sharp, focused heads; log(T) = uniform attention."""
    row_entropy = -(weights * weights.clamp_min(1e-12).log()).sum(-1)  # (B, H, T)
    mask = query_mask[:, None, :].to(row_entropy.dtype)  # (B, 1, T)
    return (row_entropy * mask).sum((0, 2)) / mask.sum((0, 2)).clamp_min(1)


class AttentionLitModule(L.LightningModule):
    def __init__(self, *, vocab: list[str], attention: str, d_model: int, num_heads: int, layers: int,
                 context_length: int, mask: str = "padding", dropout: float = 0.0, qkv_bias: bool = False,
                 normalize: str = "softmax", residual: bool = True, layer_norm: bool = True, mlp: bool = True,
                 mlp_ratio: int = 4, lr: float = 3e-3, weight_decay: float = 0.0) -> None:
        super().__init__()
        # Saved in every checkpoint: enough to rebuild the model and its vocabulary from the file alone.
        self.save_hyperparameters()
        self.vocab = vocab
        self.model = SequenceModel(
            len(vocab), attention=attention, d_model=d_model, num_heads=num_heads, layers=layers,
            context_length=context_length, causal=mask == "causal", dropout=dropout, qkv_bias=qkv_bias,
            normalize=normalize, residual=residual, layer_norm=layer_norm, mlp=mlp, mlp_ratio=mlp_ratio,
        )
        n_classes = len(vocab)
        # ModuleDict keys "train_"/"val_": "train" would clash with nn.Module.train.
        self.token_acc = torch.nn.ModuleDict({
            f"{stage}_": MulticlassAccuracy(n_classes, average="micro", ignore_index=PAD_ID) for stage in ("train", "val")
        })
        self.seq_acc = torch.nn.ModuleDict({f"{stage}_": MeanMetric() for stage in ("train", "val")})

    def forward(self, tokens: Tensor, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        padding = tokens == PAD_ID if self.hparams.mask == "padding" else None
        return self.model(tokens, key_padding_mask=padding, need_weights=need_weights)

    def shared_step(self, batch: tuple[Tensor, Tensor], stage: str, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        inputs, targets = batch
        logits, weights = self(inputs, need_weights=need_weights)
        loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD_ID)
        if stage == "train" and not self.train_step_is_logged():
            return loss, weights
        preds = logits.argmax(-1)
        real = targets != PAD_ID
        exact = ((preds == targets) | ~real).all(dim=1).float()  # every real token right
        token_acc, seq_acc = self.token_acc[f"{stage}_"], self.seq_acc[f"{stage}_"]
        token_acc(preds, targets)
        seq_acc(exact)
        on_step = stage == "train"
        # Epoch-level tensors are averaged over DDP processes (sync_dist; a no-op in one process); the
        # torchmetrics objects sync themselves.
        self.log(f"{stage}/loss", loss, on_step=on_step, on_epoch=not on_step, prog_bar=True, sync_dist=not on_step)
        self.log(f"{stage}/token_acc", token_acc, on_step=on_step, on_epoch=not on_step)
        self.log(f"{stage}/seq_acc", seq_acc, on_step=on_step, on_epoch=not on_step, prog_bar=True)
        return loss, weights

    def train_step_is_logged(self) -> bool:
        """Whether Lightning writes this training step's values to the loggers (every
        ``trainer.log_every_n_steps`` steps). The other steps skip the training metrics and ``self.log``:
        they cost a sixth of a step of the default model (each ``self.log`` moves its whole result
        object to the device); the progress bar shows the last written values meanwhile."""
        trainer = self._trainer
        if trainer is None or trainer.fast_dev_run:
            return True
        # Lightning's own rule: the steps before which `log_every_n_steps` optimizer steps have been taken.
        return (trainer.global_step + 1) % trainer.log_every_n_steps == 0

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self.shared_step(batch, "train")[0]

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        # Weights only for the first batch: enough for the entropy curves, fast path otherwise.
        first = batch_idx == 0
        _, weights = self.shared_step(batch, "val", need_weights=first)
        if first:
            real = batch[0] != PAD_ID
            for layer, w in enumerate(weights):
                for head, value in enumerate(attention_entropy(w, real)):
                    self.log(f"attention_entropy/layer{layer}/head{head}", value, on_epoch=True, sync_dist=True)

    @torch.no_grad()
    def predict_words(self, words_batch: list[list[str]]) -> tuple[list[list[str]], list[Tensor]]:
        """Predicted words and attention weights for whole sentences (eval mode, weights path)."""
        was_training = self.training
        self.eval()
        length = max(len(w) for w in words_batch)
        stoi = {w: i for i, w in enumerate(self.vocab)}
        tokens = torch.full((len(words_batch), length), PAD_ID, dtype=torch.long, device=self.device)
        for row, words in enumerate(words_batch):
            tokens[row, : len(words)] = torch.tensor([stoi.get(w, UNK_ID) for w in words], device=self.device)
        logits, weights = self(tokens, need_weights=True)
        self.train(was_training)
        preds = [[self.vocab[i] for i in row[: len(words)]] for row, words in zip(logits.argmax(-1).tolist(), words_batch, strict=True)]
        return preds, weights

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
