"""Weight-based circuits: composition and copying scores (attention_lab.analysis.circuits) and their callback."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_lab.analysis.circuits import circuit_scores, composition_score, copying_score, head_circuits
from attention_lab.analysis.tags import composition_tag, copying_tag
from conftest import compose_config


def test_identical_rank_one_matrices_compose_fully_and_orthogonal_ones_not_at_all():
    u = torch.tensor([[1.0], [2.0], [-1.0]], dtype=torch.float64)
    rank_one = u @ u.T
    assert composition_score(rank_one, rank_one) == pytest.approx(1.0)
    e0, e1 = torch.eye(3, dtype=torch.float64)[:, :1], torch.eye(3, dtype=torch.float64)[:, 1:2]
    assert composition_score(e0 @ e0.T, e1 @ e1.T) == pytest.approx(0.0)
    assert 0 < composition_score(rank_one, e0 @ e0.T) < 1


def test_a_head_whose_ov_circuit_is_the_identity_copies_and_its_negation_suppresses():
    eye = torch.eye(5, dtype=torch.float64)
    embed, unembed = torch.randn(7, 5, dtype=torch.float64), torch.randn(5, 7, dtype=torch.float64)
    assert copying_score(eye, eye, eye) == pytest.approx(1.0)
    assert copying_score(eye, -eye, eye) == pytest.approx(-1.0)
    # W_OV = (W_U W_E)^-1: the full OV circuit W_E W_OV W_U is the projection onto the tokens the embedding spans
    full_ov_projection = torch.linalg.inv(unembed @ embed)
    assert copying_score(embed, full_ov_projection, unembed) == pytest.approx(1.0)


def small_model(*overrides: str):
    from hydra.utils import instantiate

    cfg = compose_config(list(overrides))
    torch.manual_seed(0)
    model = instantiate(cfg.module, vocab=[str(i) for i in range(12)]).model
    with torch.no_grad():  # LayerNorm scales away from 1, so that folding them in matters
        for name, parameter in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                parameter.uniform_(0.5, 2.0)
    return model


def reference_scores(model, layers: list[int] | None = None) -> dict[str, float]:
    """Head by head, in float64 numpy, straight from the modules' weights: the full vocabulary x vocabulary OV
    circuit and its eigenvalues, no shortcut through the small product; of ``layers`` only (all by default),
    each taken alone."""
    def weight(linear):
        return linear.weight.detach().double().numpy().T  # x @ W

    def gamma(norm):
        return np.diag(norm.weight.detach().double().numpy())

    qk, ov = {}, {}
    for layer in range(len(model.blocks)) if layers is None else layers:
        block = model.blocks[layer]
        attention, ln = block.attention, gamma(block.norm_attention)
        d, group = attention.head_dim, attention.num_heads // attention.kv_heads
        w_q, w_k, w_v, w_o = (weight(attention.W_query), weight(attention.W_key), weight(attention.W_value),
                              weight(attention.out_proj))
        qk[layer] = [ln @ w_q[:, h * d:(h + 1) * d] @ (ln @ w_k[:, (h // group) * d:(h // group + 1) * d]).T
                     for h in range(attention.num_heads)]
        ov[layer] = [ln @ w_v[:, (h // group) * d:(h // group + 1) * d] @ w_o[h * d:(h + 1) * d, :]
                     for h in range(attention.num_heads)]
    embed = model.token_embedding.weight.detach().double().numpy()
    unembed = gamma(model.final_norm) @ weight(model.lm_head)
    expected = {}

    def score(a, b):
        return np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))

    for a in ov:
        for b in (later for later in ov if later > a):
            for i, writer in enumerate(ov[a]):
                for j in range(len(ov[b])):
                    expected[composition_tag("q", (a, i), (b, j))] = score(writer, qk[b][j])
                    expected[composition_tag("k", (a, i), (b, j))] = score(writer, qk[b][j].T)
                    expected[composition_tag("v", (a, i), (b, j))] = score(writer, ov[b][j])
        for h, head_ov in enumerate(ov[a]):
            eigenvalues = np.linalg.eigvals(embed @ head_ov @ unembed)
            expected[copying_tag(a, h)] = eigenvalues.sum().real / np.abs(eigenvalues).sum()
    return expected


@pytest.mark.parametrize("overrides", [["layers=3"], ["layers=2", "model.kv_heads=2"]], ids=["mha", "grouped"])
def test_scores_match_a_float64_reference_on_a_small_model(overrides):
    model = small_model(*overrides)
    scores = circuit_scores(head_circuits(model))
    expected = reference_scores(model)
    assert scores.keys() == expected.keys()
    layers, heads = len(model.blocks), model.blocks[0].attention.num_heads
    assert len(expected) == 3 * heads * heads * layers * (layers - 1) // 2 + layers * heads
    for name, value in expected.items():
        assert scores[name] == pytest.approx(value, abs=1e-9), name


def test_variants_without_multihead_projections_have_no_circuits():
    assert head_circuits(small_model("model=simple")) is None


def test_the_callback_logs_every_score_at_every_validation(tmp_path):
    import lightning as L
    from hydra.utils import instantiate
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attention_lab.callbacks.circuit_scores import CircuitScores

    torch.set_num_threads(1)
    cfg = compose_config(["task.train_size=64", "task.val_size=16", "seed=0"])
    torch.manual_seed(0)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos)
    logger = TensorBoardLogger(save_dir=str(tmp_path), name="", version="")
    trainer = L.Trainer(max_steps=4, val_check_interval=2, check_val_every_n_epoch=None, limit_val_batches=1, num_sanity_val_steps=0,
                        logger=logger, callbacks=[CircuitScores()], enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    trainer.fit(module, datamodule=datamodule)
    logger.experiment.flush()
    events = EventAccumulator(logger.log_dir)
    events.Reload()

    final = circuit_scores(head_circuits(module.model))
    layers, heads = cfg.model.layers, cfg.model.num_heads
    assert len(final) == 3 * heads * heads * layers * (layers - 1) // 2 + layers * heads
    logged = set(events.Tags()["scalars"])
    assert set(final) <= logged
    validations = [point.step for point in events.Scalars("val/loss")]
    assert len(validations) == 2
    for name, value in final.items():
        points = events.Scalars(name)
        assert [point.step for point in points] == validations  # at each validation, at the same step
        assert points[-1].value == pytest.approx(value, rel=1e-5, abs=1e-6)  # TensorBoard stores float32
    # every tag sorts after TensorBoard's first section ("Loss and accuracy") and none other starts with these
    assert all(name > "Loss and accuracy" for name in final)


def test_the_callback_says_once_where_the_heads_have_no_circuits(caplog):
    import logging
    from types import SimpleNamespace

    from attention_lab.callbacks.circuit_scores import CircuitScores

    logged = []
    module = SimpleNamespace(model=small_model("model=simple"), config=SimpleNamespace(name="simple"),
                             log=lambda *args, **kwargs: logged.append(args))
    trainer = SimpleNamespace(sanity_checking=False)
    callback = CircuitScores()
    with caplog.at_level(logging.INFO, logger="attention_lab.callbacks.circuit_scores"):
        callback.on_validation_epoch_end(trainer, module)
        callback.on_validation_epoch_end(trainer, module)
    assert logged == []
    notes = [record.getMessage() for record in caplog.records]
    assert len(notes) == 1 and "simple" in notes[0]


# --- hybrid stacks: only the layers with multihead-shaped heads are scored ---------------------------------------

HYBRID = ["mask=causal", "task=induction"]


def test_a_hybrid_scores_its_multihead_layers_alone_and_composes_them_across_the_recurrence():
    """Layers 0 and 2 multihead, layer 1 a gated DeltaNet: copying for the heads of 0 and 2, composition 0 -> 2
    only, each equal to the reference computed from those layers' weights alone."""
    model = small_model("mixers=[multihead,gated_deltanet,multihead]", "layers=3", *HYBRID)
    scores = circuit_scores(head_circuits(model))
    expected = reference_scores(model, [0, 2])
    assert scores.keys() == expected.keys()
    assert len(expected) == 3 * 4 * 4 + 2 * 4  # one pair of layers, 4 heads each
    for name, value in expected.items():
        assert scores[name] == pytest.approx(value, abs=1e-9), name


def test_the_callback_logs_the_multihead_layer_of_a_hybrid_and_names_the_layer_without_circuits(caplog):
    import logging
    from types import SimpleNamespace

    from attention_lab.callbacks.circuit_scores import CircuitScores

    model = small_model("mixers=[gated_deltanet,multihead]", *HYBRID)
    logged = {}
    module = SimpleNamespace(model=model, log=lambda name, value, **kwargs: logged.__setitem__(name, value))
    trainer = SimpleNamespace(sanity_checking=False)
    callback = CircuitScores()
    with caplog.at_level(logging.INFO, logger="attention_lab.callbacks.circuit_scores"):
        callback.on_validation_epoch_end(trainer, module)
        callback.on_validation_epoch_end(trainer, module)
    expected = reference_scores(model, [1])
    assert set(expected) == {copying_tag(1, head) for head in range(4)}  # one layer: copying, no composition
    assert logged.keys() == expected.keys()
    for name, value in expected.items():
        assert logged[name] == pytest.approx(value, abs=1e-9), name
    assert [record.getMessage() for record in caplog.records] == [
        "circuit scores: layer 0 (gated_deltanet) has no per-head W_Q/W_K/W_V/W_O of the multihead shape; "
        "measured layer 1"]
