"""Weight-based circuits: composition and copying scores (attention_lab.circuits) and their callback."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_lab.circuits import (
    circuit_scores,
    composition_score,
    composition_tag,
    copying_score,
    copying_tag,
    head_circuits,
)
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


def reference_scores(model) -> dict[str, float]:
    """Head by head, in float64 numpy, straight from the modules' weights: the full vocabulary x vocabulary OV
    circuit and its eigenvalues, no shortcut through the small product."""
    def weight(linear):
        return linear.weight.detach().double().numpy().T  # x @ W

    def gamma(norm):
        return np.diag(norm.weight.detach().double().numpy())

    qk, ov = [], []
    for block in model.blocks:
        attention, ln = block.attention, gamma(block.norm_attention)
        d, group = attention.head_dim, attention.num_heads // attention.kv_heads
        w_q, w_k, w_v, w_o = (weight(attention.W_query), weight(attention.W_key), weight(attention.W_value),
                              weight(attention.out_proj))
        qk.append([ln @ w_q[:, h * d:(h + 1) * d] @ (ln @ w_k[:, (h // group) * d:(h // group + 1) * d]).T
                   for h in range(attention.num_heads)])
        ov.append([ln @ w_v[:, (h // group) * d:(h // group + 1) * d] @ w_o[h * d:(h + 1) * d, :]
                   for h in range(attention.num_heads)])
    embed = model.token_embedding.weight.detach().double().numpy()
    unembed = gamma(model.final_norm) @ weight(model.lm_head)
    expected = {}

    def score(a, b):
        return np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))

    for a in range(len(ov)):
        for b in range(a + 1, len(ov)):
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
