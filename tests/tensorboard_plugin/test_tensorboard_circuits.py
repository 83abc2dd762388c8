"""The attention tab's circuit views: the logged composition, copying, patching and loss-by-index scalars as the
circuits route serves them, and the checkpoint's word tables, direct logit attribution and typed-pair patching,
each checked against a computation written here from the model's weights (not through attention_lab.analysis.circuits)."""

from __future__ import annotations

import shutil

import pytest
from test_tensorboard_tab import client_for, get

from tab_runs import write_run

WORDS = ["Life", "is", "short"]
# Lightning logs the validation after n steps at n - 1; the maps of that model are recorded at n.
LOGGED = {
    "composition/q/layer0/head0/layer1/head0": [(49, 0.1), (99, 0.6)],
    "composition/q/layer0/head1/layer1/head2": [(49, 0.2), (99, 0.3)],
    "composition/k/layer0/head0/layer1/head1": [(49, 0.05), (99, 0.8)],
    "composition/v/layer0/head1/layer1/head0": [(99, float("nan"))],
    "composition/x/layer0/head0/layer1/head0": [(99, 0.5)],  # not a kind the lab logs
    "circuit/copying/layer0/head1": [(49, -0.5), (99, 0.25)],
    "circuit/copying/layer1/head0": [(99, 0.9)],
    "patching/logit_diff/layer1/head0": [(100, 0.7)],
    "patching/logit_diff/layer1/all": [(100, 0.95)],
    "val/loss_by_index/0": [(49, 2.0), (99, 1.5)],
    "val/loss_by_index/2": [(49, 2.5), (99, 0.5)],
}


@pytest.fixture(scope="module")
def logged_client(tmp_path_factory):
    root = tmp_path_factory.mktemp("circuits_logdir")
    write_run(root / "run", steps=[50, 100], words=WORDS, scalars=LOGGED, name="")
    return client_for(root)


def test_composition_copying_and_patching_at_the_maps_step(logged_client):
    data = get(logged_client, "circuits", run="run/tensorboard", step="100").get_json()
    grids = {(g["kind"], g["writer_layer"], g["reader_layer"]): g for g in data["composition"]}
    assert set(grids) == {("q", 0, 1), ("k", 0, 1), ("v", 0, 1)}
    q = grids["q", 0, 1]
    assert (q["step"], q["logged_step"]) == (100, 99)  # shown with the maps of step 100
    assert q["cells"] == [[pytest.approx(0.6), None, None], [None, None, pytest.approx(0.3)]]  # writer x reader
    assert grids["k", 0, 1]["cells"] == [[None, pytest.approx(0.8)]]
    assert grids["v", 0, 1]["cells"] == [[None], [None]]  # NaN is shown as missing
    assert data["copying"]["cells"] == [[None, 0.25], [pytest.approx(0.9), None]]
    assert data["patching"]["cells"] == [[None], [pytest.approx(0.7)]]
    assert data["patching"]["whole_layer"] == [None, pytest.approx(0.95)]
    earlier = get(logged_client, "circuits", run="run/tensorboard", step="50").get_json()
    assert {g["kind"]: g["cells"][0][0] for g in earlier["composition"]} == {"q": pytest.approx(0.1), "k": None}
    assert earlier["copying"]["cells"] == [[None, -0.5]] and earlier["patching"] is None


def test_loss_by_index_every_step(logged_client):
    heatmap = get(logged_client, "circuits", run="run/tensorboard").get_json()["loss_by_index"]
    assert heatmap["steps"] == [49, 99] and heatmap["indices"] == 3
    assert heatmap["values"] == [[2.0, None, 2.5], [1.5, None, 0.5]]  # exact in float32


def test_a_run_without_circuits_answers_empty_and_errors_are_one_line(logged_client, tmp_path):
    write_run(tmp_path / "plain", steps=[10], words=WORDS, name="")
    data = get(client_for(tmp_path), "circuits", run="plain/tensorboard").get_json()
    assert data["composition"] == [] and data["copying"] is data["patching"] is data["loss_by_index"] is None
    missing = get(logged_client, "circuits", run="nope")
    assert missing.status_code == 404 and "no run named 'nope'" in missing.get_json()["error"]
    bad = get(logged_client, "head_circuit", run="run/tensorboard", layer="x", head="0")
    assert bad.status_code == 400 and bad.get_json()["error"] == "layer='x' is not a whole number"


# ---------------------------------------------------------------------------------------- from the checkpoint

@pytest.fixture(scope="module")
def trained(tiny_trained_run, tmp_path_factory):
    """(client, run name, module) over the shared trained run (2 layers x 4 heads, task reverse)."""
    from attention_lab.records.trained_run import find_run, load_module

    root = tmp_path_factory.mktemp("circuits_trained")
    shutil.copytree(tiny_trained_run, root / "good")
    client = client_for(root)
    run = next(r["run"] for r in get(client, "runs").get_json()["runs"] if r["run"].startswith("good/"))
    module, _ = load_module(find_run(root / "good"))
    return client, run, module


def head_slice(module, layer: int, head: int) -> slice:
    d = module.model.blocks[layer].attention.head_dim
    return slice(head * d, (head + 1) * d)


@pytest.mark.parametrize(("layer", "head"), [(0, 1), (1, 3)])
def test_word_tables_top_entries_equal_a_direct_computation(trained, layer, head):
    import torch

    client, run, module = trained
    data = get(client, "head_circuit", run=run, layer=str(layer), head=str(head)).get_json()
    model = module.model
    block, s = model.blocks[layer], head_slice(module, layer, head)
    with torch.no_grad():
        x = model.token_embedding.weight.double() * block.norm_attention.weight.double()  # (vocab, d_model)
        attention = block.attention
        q = x @ attention.W_query.weight.double()[s].T  # (vocab, d_head)
        k = x @ attention.W_key.weight.double()[s].T
        v = x @ attention.W_value.weight.double()[s].T
        qk = q @ k.T  # (vocab, vocab)
        written = v @ attention.out_proj.weight.double()[:, s].T  # (vocab, d_model)
        ov = (written * model.final_norm.weight.double()) @ model.lm_head.weight.double().T
    vocab = module.vocab
    assert data["vocab_size"] == len(vocab) and len(data["qk"]) == len(vocab) and len(data["qk"][0]["top"]) == 5
    for table, matrix in (("qk", qk), ("ov", ov)):
        for row in range(len(vocab)):
            values, columns = matrix[row].topk(5)
            got = data[table][row]
            assert got["word"] == vocab[row]
            assert [word for word, _ in got["top"]] == [vocab[c] for c in columns.tolist()]
            assert [value for _, value in got["top"]] == pytest.approx(values.tolist(), abs=1e-4)


def test_direct_logit_attribution_sums_with_the_rest_to_the_logit(trained):
    import torch

    client, run, module = trained
    words = [w for w in module.vocab if not w.startswith("<")][:5]
    data = get(client, "attribution", run=run, text=" ".join(words)).get_json()
    model = module.model
    tokens = torch.tensor([[module.vocab.index(w) for w in words]])
    outputs, final = {}, {}
    hooks = [block.attention.out_proj.register_forward_pre_hook(
        lambda _, inputs, layer=layer: outputs.__setitem__(layer, inputs[0].detach())) for layer, block in enumerate(model.blocks)]
    hooks.append(model.final_norm.register_forward_pre_hook(lambda _, inputs: final.__setitem__("x", inputs[0].detach())))
    try:
        with torch.no_grad():
            logits = module(tokens)[0].double()
    finally:
        for hook in hooks:
            hook.remove()
    x = final["x"][0].double()  # (T, d_model)
    sigma = (x.var(-1, unbiased=False, keepdim=True) + model.final_norm.eps).sqrt()
    predicted = logits.argmax(-1)
    unembed = model.lm_head.weight.double()[predicted] * model.final_norm.weight.double()  # (T, d_model)
    assert data["words"] == words and data["predictions"] == [module.vocab[i] for i in predicted.tolist()]
    expected_total = torch.zeros(len(words), dtype=torch.float64)
    for layer, block in enumerate(model.blocks):
        for head in range(block.attention.num_heads):
            s = head_slice(module, layer, head)
            alone = torch.zeros_like(outputs[layer])
            alone[..., s] = outputs[layer][..., s]  # out_proj on this head's output alone, its bias taken off
            with torch.no_grad():
                written = (block.attention.out_proj(alone) - block.attention.out_proj.bias)[0].double()
            share = (((written - written.mean(-1, keepdim=True)) / sigma) * unembed).sum(-1)  # (T,)
            assert data["heads"][layer][head] == pytest.approx(share.tolist(), abs=2e-4)
            expected_total += share
    # the rest is everything else in the residual stream, through the same linearised LayerNorm, plus its shift
    rest_stream = x - sum(
        (block.attention.out_proj(outputs[layer]) - block.attention.out_proj.bias)[0].double()
        for layer, block in enumerate(model.blocks)).detach()
    rest = (((rest_stream - rest_stream.mean(-1, keepdim=True)) / sigma) * unembed).sum(-1) \
        + model.lm_head.weight.double()[predicted] @ model.final_norm.bias.double() + model.lm_head.bias.double()[predicted]
    assert data["rest"] == pytest.approx(rest.detach().tolist(), abs=2e-4)
    logit = logits.gather(-1, predicted[:, None])[:, 0]
    assert data["logit"] == pytest.approx(logit.tolist(), abs=1e-4)
    assert (expected_total + rest).tolist() == pytest.approx(logit.tolist(), abs=1e-5)  # float32 model


def a_changing_pair(module) -> tuple[list[str], list[str]]:
    """A sentence and one with its first word replaced that the model predicts differently after the last word."""
    import torch

    words = [w for w in module.vocab if not w.startswith("<")]
    ids = {w: i for i, w in enumerate(module.vocab)}
    clean = words[:5]

    def last(sentence):
        with torch.no_grad():
            return int(module(torch.tensor([[ids[w] for w in sentence]]))[0, -1].argmax())

    for word in words[5:]:
        corrupted = [word, *clean[1:]]
        if last(corrupted) != last(clean):
            return clean, corrupted
    pytest.fail("no first word changes the tiny model's last prediction")


def test_typed_pair_patching_equals_patching_by_hand(trained):
    import torch

    client, run, module = trained
    clean, corrupted = a_changing_pair(module)
    data = get(client, "patch_pair", run=run, clean=" ".join(clean), corrupted=" ".join(corrupted)).get_json()
    model = module.model
    ids = {w: i for i, w in enumerate(module.vocab)}
    clean_tokens, corrupted_tokens = (torch.tensor([[ids[w] for w in s]]) for s in (clean, corrupted))
    merged = {}  # the clean run's merged head outputs (out_proj's input) per layer
    hooks = [block.attention.out_proj.register_forward_pre_hook(
        lambda _, inputs, layer=layer: merged.__setitem__(layer, inputs[0].detach())) for layer, block in enumerate(model.blocks)]
    with torch.no_grad():
        clean_logits = module(clean_tokens)[0, -1]
    for hook in hooks:
        hook.remove()
    with torch.no_grad():
        corrupted_logits = module(corrupted_tokens)[0, -1]
    right, other = int(clean_logits.argmax()), int(corrupted_logits.argmax())
    assert (data["clean_prediction"], data["corrupted_prediction"]) == (module.vocab[right], module.vocab[other])

    def diff(logits):
        return float(logits[right] - logits[other])

    def patched(layer, s):
        def put_back(_, inputs):
            x = inputs[0].clone()
            x[..., s] = merged[layer][..., s]
            return (x,)
        hook = model.blocks[layer].attention.out_proj.register_forward_pre_hook(put_back)
        try:
            with torch.no_grad():
                return diff(module(corrupted_tokens)[0, -1])
        finally:
            hook.remove()

    gap = diff(clean_logits) - diff(corrupted_logits)
    assert data["clean_diff"] == pytest.approx(diff(clean_logits), abs=1e-4) and gap > 0
    for layer, block in enumerate(model.blocks):
        for head in range(block.attention.num_heads):
            expected = (patched(layer, head_slice(module, layer, head)) - diff(corrupted_logits)) / gap
            assert data["cells"][layer][head] == pytest.approx(expected, abs=1e-3)
        assert data["whole_layer"][layer] == pytest.approx((patched(layer, slice(None)) - diff(corrupted_logits)) / gap,
                                                           abs=1e-3)


def test_typed_pair_refusals_are_one_line(trained):
    client, run, module = trained
    words = [w for w in module.vocab if not w.startswith("<")][:4]
    same = get(client, "patch_pair", run=run, clean=" ".join(words), corrupted=" ".join(words))
    assert same.status_code == 400 and "nothing to restore" in same.get_json()["error"]
    uneven = get(client, "patch_pair", run=run, clean=" ".join(words), corrupted=" ".join(words[:3]))
    assert uneven.status_code == 400 and "need the same number" in uneven.get_json()["error"]
    far = get(client, "head_circuit", run=run, layer="7", head="0")
    assert far.status_code == 400 and "has 2 layers of 4 heads" in far.get_json()["error"]
    many = get(client, "head_circuit", run=run, layer="0", head="0", k="50")
    assert many.status_code == 400 and many.get_json()["error"] == "k=50: the word tables show 1 to 20 words a row"
    three = get(client, "head_circuit", run=run, layer="0", head="0", k="3").get_json()
    assert {len(row["top"]) for row in three["qk"] + three["ov"]} == {3}


def test_patching_measured_once_at_the_end_is_read_too(tmp_path):
    """A run's patching at the end is written as this plugin's own scalars (callbacks/head_ablation.py's
    write_end_values), not as TensorBoard scalars: the circuits route reads both."""
    from torch.utils.tensorboard import SummaryWriter

    from attention_lab.records.probe_summary import end_values_summary

    write_run(tmp_path / "run", steps=[100], words=WORDS, name="")
    writer = SummaryWriter(log_dir=str(tmp_path / "run" / "tensorboard"))
    writer.file_writer.add_summary(end_values_summary({"patching/logit_diff/layer0/head1": 0.4,
                                                       "patching/logit_diff/layer0/all": 0.6}), 100)
    writer.close()
    grid = get(client_for(tmp_path), "circuits", run="run/tensorboard", step="100").get_json()["patching"]
    assert grid["cells"] == [[None, pytest.approx(0.4)]] and grid["whole_layer"] == [pytest.approx(0.6)]
    assert grid["step"] == 100 and grid["logged_step"] == 100
