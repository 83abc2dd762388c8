"""A trained run in Python in one call (attention_lab.load_run), and docs/library.md's example of it, run as
written on a trained run: its maps, ablation and patching checked against the model read with torch alone and
edited at its output projection, not through the hook points the example uses."""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from attention_lab.errors import ReviewError
from attention_lab.model import TrainedModel
from conftest import ROOT

LIBRARY = ROOT / "docs" / "library.md"
PLACEHOLDER = "outputs/runs/<date>/<time>"


def docs_example() -> str:
    """The code block of docs/library.md's section "A trained run in Python"."""
    text = LIBRARY.read_text()
    section = text[text.index("\n## A trained run in Python\n"):]
    return re.search(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL).group(1)


def reference(run_dir: Path) -> TrainedModel:
    """The run's last checkpoint read with torch alone."""
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    return TrainedModel.from_checkpoint(checkpoint)


@contextmanager
def at_out_proj(model: TrainedModel, layer: int, edit):
    """``edit(inputs)`` on what layer ``layer``'s out_proj reads: the heads' outputs side by side, head h at
    columns h*d_v..(h+1)*d_v (a torch forward pre-hook, independent of the lab's hook points)."""
    handle = model.model.blocks[layer].attention.out_proj.register_forward_pre_hook(lambda _m, args: (edit(args[0]),))
    try:
        yield
    finally:
        handle.remove()


def test_the_docs_example_runs_as_written_on_a_trained_run(tiny_trained_run, one_torch_thread):
    code = docs_example()
    assert len(code.strip().splitlines()) <= 15 and code.count(PLACEHOLDER) == 1, code
    names: dict = {}
    exec(compile(code.replace(PLACEHOLDER, str(tiny_trained_run)), str(LIBRARY), "exec"), names)  # noqa: S102

    model, words, other = names["model"], names["words"], names["other"]
    plain = reference(tiny_trained_run)
    assert isinstance(model, TrainedModel) and not model.training and model.vocab == plain.vocab
    expected, expected_maps = plain.predict_words([words])
    assert names["predicted"] == expected
    assert len(names["maps"]) == len(expected_maps) == 2
    for got, want in zip(names["maps"], expected_maps, strict=True):
        assert got.shape == (1, 4, len(words), len(words)) and torch.equal(got, want)

    d_v = plain.config.d_model // plain.config.num_heads

    def heads_off(inputs):  # the example's heads 0-3 of layer 1: columns 0 to 4 d_v
        inputs = inputs.clone()
        inputs[..., :4 * d_v] = 0
        return inputs

    with at_out_proj(plain, 1, heads_off):
        assert names["ablated"] == plain.predict_words([words])[0]
    seen = {}
    with at_out_proj(plain, 1, lambda inputs: seen.setdefault("other", inputs.clone())):
        plain.predict_words([other])
    with at_out_proj(plain, 1, lambda inputs: seen["other"]):  # every head of layer 1: all its columns
        assert names["patched"] == plain.predict_words([words])[0]
    # The edits change what this run predicts: the checks above can tell an edit that did nothing.
    assert names["ablated"] != expected and names["patched"] != expected


def test_a_checkpoint_file_loads_the_same_model_and_a_wrong_path_is_one_line(tiny_trained_run, tmp_path):
    from attention_lab import load_run

    from_dir, from_file = load_run(tiny_trained_run), load_run(tiny_trained_run / "checkpoints" / "last.ckpt")
    for name, tensor in reference(tiny_trained_run).state_dict().items():
        assert torch.equal(from_dir.state_dict()[name], tensor) and torch.equal(from_file.state_dict()[name], tensor)
    with pytest.raises(ReviewError, match="does not exist") as refused:
        load_run(tmp_path / "nothing")
    assert "\n" not in str(refused.value)
    (tmp_path / "notes.ckpt").write_text("not a checkpoint\n")
    with pytest.raises(ReviewError, match="cannot load checkpoint"):
        load_run(tmp_path / "notes.ckpt")


def test_importing_the_package_imports_no_torch_until_load_run_is_used():
    """Only a fresh process shows what an import imports."""
    check = ("import sys, attention_lab; assert 'torch' not in sys.modules, 'torch'; "
             "assert 'load_run' in dir(attention_lab) and 'load_run' in attention_lab.__all__; "
             "from attention_lab import load_run; print(load_run.__module__)")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "attention_lab.records.trained_run"
    with pytest.raises(AttributeError, match="no attribute 'load_runs'"):
        import attention_lab

        attention_lab.load_runs  # noqa: B018


@pytest.mark.parametrize(("name", "option", "old"), [("mla", "latent_norm", False), ("mamba2", "ngroups", 4)])
def test_a_checkpoint_saved_before_its_variant_gained_an_option_loads_as_it_was_built(name, option, old):
    """A run saved before `mla`'s latent RMSNorm or `mamba2`'s head groups: its config lacks the option, its weights
    are the module without it. It loads as that module (the same outputs); weights that fit neither still fail on
    the saved config's own mismatch."""
    from attention_lab.model import WeightsMismatch

    vocab = ["<pad>", "<unk>", *map(str, range(10))]
    config = {"name": name, "d_model": 16, "num_heads": 4, "layers": 2, "mask": "causal", "context_length": 8,
              "options": {option: old}}
    torch.manual_seed(0)
    built = TrainedModel(config, vocab).eval()
    saved = {**built.config.to_dict()}
    saved["options"] = {k: v for k, v in saved["options"].items() if k != option}  # as written before the option
    checkpoint = {"hyper_parameters": {"model": saved, "vocab": vocab},
                  "state_dict": {f"model.{k}": v for k, v in built.model.state_dict().items()}}
    loaded = TrainedModel.from_checkpoint(checkpoint)
    assert loaded.config.options[option] == old
    tokens = torch.randint(2, len(vocab), (3, 8))
    with torch.no_grad():
        assert torch.equal(loaded(tokens), built(tokens))
    broken = {**checkpoint, "state_dict": dict(list(checkpoint["state_dict"].items())[:-1])}
    with pytest.raises(WeightsMismatch, match="^its weights do not fit its model config"):
        TrainedModel.from_checkpoint(broken)
