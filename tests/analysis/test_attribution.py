"""Attribution patching: its gradient against finite differences, its exactness where the metric is linear in the
head outputs, how it ranks the heads against activation patching, and the rank correlation by hand."""

from __future__ import annotations

import math

import pytest
import torch
from hydra.utils import instantiate

from attention_lab.analysis.ablation import head_output_name
from attention_lab.analysis.attribution import attribute_batches, head_gradients, rank_correlation
from attention_lab.analysis.patching import corrupt_batch, logit_diff_sum, patch_batches
from attention_lab.analysis.tags import ATTRIBUTION, PATCHING, tag
from attention_lab.attention.hooks import capture, intervene
from attention_lab.data.tasks import build_task
from conftest import compose_config


def tiny_model(*overrides: str):
    """An untrained float64 induction model (d_model 16, 4 heads) and one corrupted validation batch."""
    torch.manual_seed(0)
    cfg = compose_config(["task=induction", "mask=causal", "d_model=16", "heads=4", "task.val_size=16", *overrides])
    datamodule = instantiate(cfg.data)
    datamodule.setup("fit")
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos).double().eval()
    inputs, targets = datamodule.val_set.tensors
    batch = corrupt_batch(build_task("induction"), (inputs, targets))
    assert batch[4].any()
    return module, batch


def test_the_gradient_is_the_finite_difference_of_the_logit_difference():
    """Layer 0's head 1 (upstream of layer 1's softmax, so M is not linear in it): dM/da along the clean - corrupted
    change and along one coordinate, against central differences of M with that head's output shifted. Both layers
    carry gradients, as in :func:`attribute_batches`, so a path through layer 1's heads that the gradient dropped
    would show; half the counted positions are masked out, so a metric that ignored the mask would show too."""
    module, (clean, corrupted, targets, implied, mask) = tiny_model("layers=2")
    mask = mask & (torch.arange(mask.shape[1]) % 2 == 0)
    name, head = head_output_name(0), 1
    with torch.no_grad(), capture(module.model, names=[name]) as cache:
        module(clean)
    names = [head_output_name(layer) for layer in range(2)]
    _, outputs, gradients = head_gradients(module, corrupted, targets, implied, mask, names)
    change = torch.zeros_like(outputs[name])
    change[:, head] = cache[name][:, head] - outputs[name][:, head]
    coordinate = torch.zeros_like(change)
    coordinate[3, head, 5, 2] = 1.0
    def metric(shift: torch.Tensor) -> float:
        with torch.no_grad(), intervene(module.model, {name: lambda tensor: tensor + shift}):
            return logit_diff_sum(module(corrupted), targets, implied, mask)

    eps = 1e-5
    for direction in (change, coordinate):
        numeric = (metric(eps * direction) - metric(-eps * direction)) / (2 * eps)
        analytic = float((gradients[name] * direction).sum())
        assert analytic != 0.0
        assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_where_the_logits_are_linear_in_the_head_outputs_attribution_is_activation_patching():
    """One attention-only layer (``block=attention_only``: no residual, LayerNorm or MLP): the logits are
    lm_head(out_proj(heads merged)), an affine function of the head outputs, and M a linear function of the logits.
    So M(a_corrupt + d) - M(a_corrupt) = dM/da . d exactly for any change d, the first-order estimate has no
    remainder, and patching one head (d = its clean - corrupted output, 0 elsewhere) restores exactly the share
    attribution estimates. In float64 the two agree to rounding."""
    module, batch = tiny_model("layers=1", "block=attention_only")
    exact = patch_batches(module, [batch])
    estimate = attribute_batches(module, [batch])
    heads = [tag(PATCHING, 0, h) for h in range(4)]
    assert set(estimate) == {tag(ATTRIBUTION, 0, h) for h in range(4)}
    values = [estimate[tag(ATTRIBUTION, 0, h)] for h in range(4)]
    assert len({round(v, 3) for v in values}) > 1  # the heads differ: the comparison is not of constants
    for h, want in enumerate(exact[name] for name in heads):
        assert values[h] == pytest.approx(want, abs=1e-6)
    # The heads' shares add up to the whole layer's, which patching measures on its own run.
    assert sum(values) == pytest.approx(exact[tag(PATCHING, 0, None)], abs=1e-6)


def test_a_nonlinear_model_ranks_its_heads_against_activation_patching():
    """Two full transformer blocks (LayerNorm, MLP, a softmax downstream of layer 0): the estimate is first order
    only, so only its rank correlation with patching is reported, a number in [-1, 1]."""
    module, batch = tiny_model("layers=2")
    exact = patch_batches(module, [batch])
    estimate = attribute_batches(module, [batch])
    assert len(estimate) == 8 and all(math.isfinite(v) for v in estimate.values())
    as_patching = {tag(PATCHING, *divmod(i, 4)): estimate[tag(ATTRIBUTION, *divmod(i, 4))] for i in range(8)}
    correlation = rank_correlation(as_patching, exact)
    assert math.isfinite(correlation) and -1.0 <= correlation <= 1.0
    print(f"attribution vs patching, 8 heads: Spearman {correlation:.3f}")


def test_the_rank_correlation_by_hand_with_ties():
    """x = 1, 2, 2, 5 -> ranks 1, 2.5, 2.5, 4; y = 3, 1, 4, 4 -> ranks 2, 1, 3.5, 3.5 (means 2.5 each).
    Deviations (-1.5, 0, 0, 1.5) and (-0.5, -1.5, 1, 1): covariance sum 0.75 + 1.5 = 2.25; squares 4.5 and 4.5;
    rho = 2.25 / 4.5 = 0.5. The key only one side has, and a NaN, are left out."""
    estimate = {"a": 1.0, "b": 2.0, "c": 2.0, "d": 5.0, "only": 9.0, "nan": math.nan}
    exact = {"a": 3.0, "b": 1.0, "c": 4.0, "d": 4.0, "nan": 1.0}
    assert rank_correlation(estimate, exact) == pytest.approx(0.5, abs=1e-12)
    assert rank_correlation({"a": 1.0, "b": 2.0, "c": 3.0}, {"c": 0.0, "b": 1.0, "a": 2.0}) == pytest.approx(-1.0)
    assert math.isnan(rank_correlation({"a": 1.0}, {"a": 1.0}))
    assert math.isnan(rank_correlation({"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 2.0}))
