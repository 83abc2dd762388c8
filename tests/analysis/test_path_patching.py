"""Path patching (attention_lab.analysis.path_patching): its invariants against activation patching, a hand-built
model whose paths are known, the pairs and models it refuses, and hybrid stacks layer by layer."""

from __future__ import annotations

import math

import pytest
import torch
from hydra.utils import instantiate

from attention_lab.analysis.patching import corrupt_batch, patch_batches
from attention_lab.analysis.path_patching import (
    PathPatchingError,
    patch_paths,
    path_patch,
    path_tag,
    receiver_layers,
    unsupported,
)
from attention_lab.analysis.tags import PATCHING, tag
from attention_lab.data.tasks import build_task
from conftest import compose_config

# Attention only, in a residual stream (the attention_only block has none): x = x + attention(x), no MLP.
ATTENTION_ONLY = ["block=attention_only", "block.residual=true"]


def small_model(*overrides: str):
    """A random 2-layer, 4-head induction model in float64 (so that sums of paths match to 1e-9) and one corrupted
    batch of 16 validation rows."""
    torch.manual_seed(0)
    cfg = compose_config(["task=induction", "mask=causal", "task.val_size=16", *overrides])
    datamodule = instantiate(cfg.data)
    datamodule.setup("fit")
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos).double().eval()
    with torch.no_grad():  # larger weights than the init's, so that every head moves the logits visibly
        for parameter in module.model.parameters():
            parameter.mul_(3.0)
    return module, [corrupt_batch(build_task("induction"), datamodule.val_set.tensors)]


def every_input(layer: int, heads: range) -> list[tuple[int, int, str]]:
    return [(layer, head, kind) for head in heads for kind in "qkv"]


@pytest.mark.parametrize("layer_norm", [False, True])
def test_every_path_out_of_a_sender_at_once_is_its_activation_patch(layer_norm):
    """In two layers, patching the sender's path into every q, k and v of layer 1 and into the logits, in one run,
    is activation patching the sender: layer 1's heads then read exactly the input they read in the activation
    patch (the corrupted run with only the sender clean; every other layer-0 head computes the same output in
    both), and the final residual is the embeddings + every head's output, of which only the sender's is missing
    its clean value and the direct path adds it back. This holds with LayerNorm too: nothing is linearised."""
    module, batches = small_model(*ATTENTION_ONLY, f"block.layer_norm={str(layer_norm).lower()}")
    activation = patch_batches(module, batches)
    for head in range(4):
        want = activation[tag(PATCHING, 0, head)]
        assert abs(want) > 1e-3  # the sender matters, so the comparison can fail
        assert patch_paths(module, batches, (0, head), every_input(1, range(4)), direct=True) == pytest.approx(want,
                                                                                                          abs=1e-9)
        # Without the direct path (or without one receiver) it is something else.
        assert patch_paths(module, batches, (0, head), every_input(1, range(4))) != pytest.approx(want, abs=1e-6)


def test_without_layer_norm_the_paths_of_separate_receivers_add_up_to_the_activation_patch():
    """Attention only and no LayerNorm: the logits are linear in the final residual stream, the sum of the
    embeddings and of every head's output through out_proj. Patching one receiver's q, k and v changes that
    receiver's output only, and the direct path changes only the sender's term, so the changes, and hence the
    fractions restored, add: Σ_j joint(receiver j) + logits = the activation patch."""
    module, batches = small_model(*ATTENTION_ONLY, "block.layer_norm=false")
    activation = patch_batches(module, batches)
    sender = (0, 1)
    paths = path_patch(module, batches, sender)
    assert set(paths) == {path_tag(sender)} | {path_tag(sender, (1, j), kind) for j in range(4) for kind in "qkv"}
    receivers = sum(patch_paths(module, batches, sender, every_input(1, range(j, j + 1))) for j in range(4))
    assert receivers + paths[path_tag(sender)] == pytest.approx(activation[tag(PATCHING, 0, 1)], abs=1e-9)
    # The one-input paths are the one-input joint patches.
    for kind in "qkv":
        assert paths[path_tag(sender, (1, 2), kind)] == pytest.approx(
            patch_paths(module, batches, sender, [(1, 2, kind)]), abs=1e-12)


def test_a_receiver_whose_keys_or_values_are_zero_has_no_k_or_v_path():
    """Hand-built: receiver (1, 2) with W_key's rows zero computes all-zero keys from any input, so its scores are
    all 0 whatever its queries: its k and q paths restore exactly 0, its v path not; receiver (1, 3) with W_value's rows zero outputs 0 whatever it attends to, so all three of
    its paths restore exactly 0. The other heads keep their weights, and their paths are not 0: patching a whole
    projection instead of the receiver's own columns would move these values off 0."""
    module, batches = small_model(*ATTENTION_ONLY, "block.layer_norm=false")
    attention = module.model.blocks[1].attention
    width = attention.head_dim
    with torch.no_grad():
        attention.W_key.weight[2 * width:3 * width] = 0.0
        attention.W_value.weight[3 * width:4 * width] = 0.0
    for sender in [(0, 0), (0, 3)]:
        paths = path_patch(module, batches, sender)
        assert paths[path_tag(sender, (1, 2), "k")] == paths[path_tag(sender, (1, 2), "q")] == 0.0
        assert all(paths[path_tag(sender, (1, 3), kind)] == 0.0 for kind in "qkv")
        assert abs(paths[path_tag(sender, (1, 2), "v")]) > 1e-6
        assert all(abs(paths[path_tag(sender, (1, j), kind)]) > 1e-6 for j in (0, 1) for kind in "qkv")


def test_a_sender_that_writes_nothing_has_no_path_at_all():
    """Hand-built: head (0, 1)'s columns of out_proj zero, so it adds nothing to the residual stream: every path
    out of it, and its activation patch, restore exactly 0."""
    module, batches = small_model(*ATTENTION_ONLY, "block.layer_norm=false")
    width = module.model.blocks[0].attention.head_dim
    with torch.no_grad():
        module.model.blocks[0].attention.out_proj.weight[:, width:2 * width] = 0.0
    assert set(path_patch(module, batches, (0, 1)).values()) == {0.0}
    assert patch_batches(module, batches)[tag(PATCHING, 0, 1)] == 0.0


@pytest.mark.parametrize("receiver", [(0, 2), (0, 0), (1, 1)])
def test_a_receiver_in_the_same_or_an_earlier_layer_is_refused_before_any_run(receiver):
    module, batches = small_model(*ATTENTION_ONLY, "layers=3")
    sender = (1, 0) if receiver[0] == 1 else (0, 1)
    with pytest.raises(PathPatchingError) as refused:
        path_patch(module, iter(()), sender, [receiver])  # an empty iterator: no batch is ever read
    assert (refused.value.sender, refused.value.receiver) == (sender, receiver)
    with pytest.raises(PathPatchingError):
        patch_paths(module, batches, sender, [(*receiver, "q")])
    assert set(path_patch(module, batches, (1, 0))) == {path_tag((1, 0))} | {
        path_tag((1, 0), (2, j), kind) for j in range(4) for kind in "qkv"}  # a later layer is taken


@pytest.mark.parametrize("overrides", [["block=attention_only"], ["model=simple"]])
def test_models_where_nothing_can_be_measured_get_nothing_and_a_reason(overrides):
    module, batches = small_model(*overrides)
    assert unsupported(module) is not None
    assert unsupported(small_model()[0]) is None  # the default transformer is measured
    if overrides == ["model=simple"]:  # no heads of its own: no sender at all
        with pytest.raises(PathPatchingError, match="no heads with weights of their own"):
            path_patch(module, batches, (0, 0))
        return
    assert path_patch(module, batches, (0, 0)) == {}
    assert math.isnan(patch_paths(module, batches, (0, 0), [(1, 0, "q")]))


@pytest.mark.parametrize(("overrides", "why"), [
    (["kv_heads=2"], "keys and values shared between heads (kv_heads=2)"),
    (["model=gated"], "a gate on each head computed from its input"),
    (["model=diff"], "no per-head W_query/W_key/W_value"), (["model=mla"], "no per-head W_query/W_key/W_value")])
def test_heads_without_their_own_projections_send_to_the_logits_but_receive_nothing(overrides, why):
    """Their heads are senders like any (the direct path goes through hook_head_output), but no layer can
    receive: by default only the direct path is measured, and a receiver asked for is refused with the reason."""
    module, batches = small_model(*overrides)
    assert unsupported(module) is None
    layers, line = receiver_layers(module)
    assert layers == [] and line is not None and line.startswith("layers 0, 1 (") and why in line
    paths = path_patch(module, batches, (0, 0))
    assert set(paths) == {path_tag((0, 0))} and math.isfinite(paths[path_tag((0, 0))])
    with pytest.raises(PathPatchingError, match="layer 1 .* cannot receive") as refused:
        patch_paths(module, batches, (0, 0), [(1, 0, "q")])
    assert refused.value.receiver == (1, 0) and why in refused.value.why


# --- hybrid stacks: a recurrent layer sends, only the multihead layers receive -----------------------------------

HYBRID = ["mixers=[gated_deltanet,multihead]", *ATTENTION_ONLY]


@pytest.mark.parametrize("layer_norm", [False, True])
def test_a_recurrent_senders_paths_into_every_input_at_once_are_its_activation_patch(layer_norm):
    """As above with layer 0 a gated DeltaNet: freezing and patching go through its hook_head_output, so layer 1
    reads what it reads in the activation patch and the direct path adds the rest."""
    module, batches = small_model(*HYBRID, f"block.layer_norm={str(layer_norm).lower()}")
    assert receiver_layers(module) == ([1], "layer 0 (gated_deltanet): no per-head W_query/W_key/W_value")
    activation = patch_batches(module, batches)
    for head in range(4):
        want = activation[tag(PATCHING, 0, head)]
        assert abs(want) > 1e-3
        paths = path_patch(module, batches, (0, head))  # receivers=None: layer 1's heads and the logits
        assert set(paths) == {path_tag((0, head))} | {path_tag((0, head), (1, j), kind)
                                                      for j in range(4) for kind in "qkv"}
        assert patch_paths(module, batches, (0, head), every_input(1, range(4)), direct=True) == pytest.approx(
            want, abs=1e-9)
        assert patch_paths(module, batches, (0, head), every_input(1, range(4))) != pytest.approx(want, abs=1e-6)
        if not layer_norm:  # linear in each receiver's output: the separate receivers and the logits add up
            receivers = sum(patch_paths(module, batches, (0, head), every_input(1, range(j, j + 1)))
                            for j in range(4))
            assert receivers + paths[path_tag((0, head))] == pytest.approx(want, abs=1e-9)


def test_a_recurrent_layer_is_skipped_as_a_receiver_and_refused_when_asked_for():
    module, batches = small_model("mixers=[multihead,gated_deltanet,multihead]", "layers=3", *ATTENTION_ONLY)
    assert receiver_layers(module) == ([0, 2], "layer 1 (gated_deltanet): no per-head W_query/W_key/W_value")
    paths = path_patch(module, batches, (0, 1))
    assert set(paths) == {path_tag((0, 1))} | {path_tag((0, 1), (2, j), kind) for j in range(4) for kind in "qkv"}
    assert set(path_patch(module, batches, (1, 3))) == {path_tag((1, 3))} | {
        path_tag((1, 3), (2, j), kind) for j in range(4) for kind in "qkv"}  # a recurrent sender
    with pytest.raises(PathPatchingError) as refused:
        path_patch(module, iter(()), (0, 1), [(2, 0), (1, 2)])  # no batch is read
    assert refused.value.receiver == (1, 2)
    assert str(refused.value) == ("path patching layer0/head1 -> layer1/head2: layer 1 (gated_deltanet) cannot "
                                  "receive: no per-head W_query/W_key/W_value")
