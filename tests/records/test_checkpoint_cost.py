"""What a checkpoint can make the review tools and the attention tab spend: each crafted file here is small, and is
refused in one line before anything of the size it describes is allocated (attention_lab.records.model_bounds); a refused
file is refused again without loading it, and keeps nothing; a word table holds a block of its rows at a time.
Peak memory is measured as the process's resident peak (crafted_checkpoints.peak_growth)."""

from __future__ import annotations

import gc
import time

import pytest

from attention_lab.errors import ReviewError
from crafted_checkpoints import (
    MB,
    genuine_weights,
    model_config,
    peak_growth,
    rewrite_archive,
    status_mb,
    unbacked_weights,
    vocabulary,
    write_checkpoint,
)

WORDS = vocabulary(8)
# A model of 2 layers, d_model 1024: 25 million numbers, 100 MB once built, from a file of kilobytes (a few hundred
# with overlapping rows, 16 MB with every weight in one storage).
LARGE = model_config(d_model=1024, num_heads=4, layers=2)
SMALL_PEAK_MB = 40  # what refusing a crafted file may add to the process (the model it describes: 100 MB or more)


def load(run_dir):
    from attention_lab.records.trained_run import find_run, load_module

    return load_module(find_run(run_dir))


def refused(run_dir) -> str:
    """The one line load_module refuses ``run_dir``'s checkpoint with."""
    with pytest.raises(ReviewError) as err:
        load(run_dir)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"cannot load checkpoint {run_dir / 'checkpoints' / 'last.ckpt'}: ")
    return line


@pytest.mark.parametrize("kind", ["stride0", "overlapping", "meta", "shared"])
def test_weights_that_store_far_less_are_refused_before_building(tmp_path, kind):
    path = write_checkpoint(tmp_path / "run", LARGE, WORDS, unbacked_weights(LARGE, WORDS, kind))
    assert path.stat().st_size < (20 if kind == "shared" else 1) * MB  # the model it describes: 100 MB
    refused(tmp_path / "run")  # once, for the pages of torch's code it runs
    started = time.perf_counter()
    with peak_growth() as peak:
        line = refused(tmp_path / "run")
    assert time.perf_counter() - started < 5
    expected = {"meta": "weight model.token_embedding.weight is not a tensor of stored numbers",
                "shared": "declare a model of 25,"}.get(kind, "weight model.token_embedding.weight (8x1024) is not "
                                                            "backed by a stored number for each")
    assert expected in line, line
    assert peak["mb"] < SMALL_PEAK_MB, f"refusing it added {peak['mb']:.0f} MB"


@pytest.mark.parametrize("rewrite", [{"deflate": True}, {"share_equal_records": True}])
def test_an_archive_that_loads_larger_than_its_file_is_refused_before_loading(tmp_path, rewrite):
    """Eight records of 25 MB of zeros: compressed to a few hundred KB, or written once and pointed at eight times,
    they would load as 200 MB."""
    import torch

    model = model_config()
    padding = {f"padding{i}": torch.zeros(25 * MB // 4) for i in range(8)}
    path = write_checkpoint(tmp_path / "run", model, WORDS, genuine_weights(model, WORDS), **padding)
    rewrite_archive(path, **rewrite)
    assert path.stat().st_size < 30 * MB
    refused(tmp_path / "run")  # once, for the pages of torch's code it runs
    with peak_growth() as peak:
        line = refused(tmp_path / "run")
    expected = "is compressed" if "deflate" in rewrite else "(records that overlap): refused before loading"
    assert expected in line, line
    assert peak["mb"] < SMALL_PEAK_MB, f"refusing it added {peak['mb']:.0f} MB"


# Each beyond one bound of attention_lab.records.model_bounds by one, in a model otherwise small enough to build in a moment.
BEYOND = {
    "model.layers": (model_config(d_model=4, num_heads=1, layers=257), 8),
    "model.num_heads": (model_config(d_model=260, num_heads=257 + 3), 8),
    "model.layers x model.num_heads": (model_config(d_model=64, num_heads=64, layers=65), 8),
    "model.d_model": (model_config(name="simple", num_heads=1, d_model=4097, mlp=False), 8),
    "model.context_length": (model_config(position="none", context_length=(1 << 16) + 1), 8),
    "a vocabulary of words": (model_config(name="simple", num_heads=1, d_model=2), (1 << 17) + 1),
}


@pytest.mark.parametrize("setting", list(BEYOND))
def test_a_dimension_beyond_its_bound_is_refused_naming_it(tmp_path, setting):
    model, words = BEYOND[setting]
    vocab = vocabulary(words)
    write_checkpoint(tmp_path / "run", model, vocab, genuine_weights(model, vocab))
    line = refused(tmp_path / "run")
    from attention_lab.records import model_bounds

    assert f"declare {setting}=" in line and "more than the" in line, line
    limit = int(line.split("more than the ")[1].split()[0])
    assert limit in {model_bounds.MAX_LAYERS, model_bounds.MAX_HEADS, model_bounds.MAX_LAYER_HEADS,
                     model_bounds.MAX_D_MODEL, model_bounds.MAX_CONTEXT, model_bounds.MAX_VOCAB}


def test_a_refusal_is_one_line_from_visualize_and_a_bad_step_too(tmp_path):
    """The script prints the refusal as its one error line; a global_step that is not a number is one line too."""
    from conftest import ROOT, run_in_process

    write_checkpoint(tmp_path / "crafted", LARGE, WORDS, unbacked_weights(LARGE, WORDS, "stride0"))
    model = model_config()
    write_checkpoint(tmp_path / "step", model, WORDS, genuine_weights(model, WORDS), global_step="many")
    for run, expected in (("crafted", "is not backed by a stored number"), ("step", "ValueError: invalid literal")):
        proc = run_in_process(ROOT / "scripts" / "visualize.py", str(tmp_path / run), "--text", "w0 w1",
                              "--out", str(tmp_path / f"out-{run}"))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and expected in lines[0], proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr


# ------------------------------------------------------------------------------------ the tab's cache of refusals

def crafted_run(root, kind: str):
    """A run dir under ``root`` whose checkpoint is refused for ``kind``; ``kept`` holds 100 MB of real numbers (not
    weights of the model) and declares a context of 16 million: refused once it is read."""
    import torch

    run, model = root / kind, model_config()
    if kind == "kept":
        write_checkpoint(run, model_config(context_length=1 << 24), WORDS, genuine_weights(model, WORDS),
                         padding=torch.ones(100 * MB // 4))
    elif kind == "deflated":
        write_checkpoint(run, model, WORDS, genuine_weights(model, WORDS), padding=torch.zeros(100 * MB // 4))
        rewrite_archive(run / "checkpoints" / "last.ckpt", deflate=True)
    else:
        write_checkpoint(run, LARGE, WORDS, unbacked_weights(LARGE, WORDS, kind))
    return run


@pytest.mark.parametrize("kind", ["kept", "deflated", "stride0", "meta"])
def test_a_refused_checkpoint_is_refused_again_without_loading_and_keeps_nothing(tmp_path, monkeypatch, kind):
    from attention_lab.records import trained_run
    from attention_lab.tensorboard_plugin.sentence import SentenceError, SentenceModels

    crafted_run(tmp_path, kind)
    loads = []
    load_module = trained_run.load_module
    monkeypatch.setattr(trained_run, "load_module", lambda files: loads.append(files) or load_module(files))
    models = SentenceModels(str(tmp_path))
    gc.collect()
    before = status_mb("RssAnon")
    failures = []
    for _ in range(2):
        with pytest.raises(SentenceError) as err:
            models.module_for(kind)
        failures.append(err.value)
    gc.collect()
    kept = status_mb("RssAnon") - before
    assert kept < SMALL_PEAK_MB, f"the refusal keeps {kept:.0f} MB"
    assert len(loads) == 1 and not models.loaded
    assert {(failure.reason, failure.status) for failure in failures} == {(failures[0].reason, 422)}
    assert "\n" not in failures[0].reason
    assert all(failure.__context__ is None for failure in failures)  # no error of the failed load, nor its frames


# ------------------------------------------------------------------------------------------------ word tables

def test_word_tables_hold_a_block_of_rows_at_a_time_and_equal_the_whole_product():
    """5,000 words: the whole vocab x vocab products took 400 MB; the tables are still those of the whole product,
    computed here from the weights (not through attention_lab.analysis.circuits)."""
    import torch

    from attention_lab.model import TrainedModel
    from attention_lab.tensorboard_plugin.checkpoint_circuits import MAX_ROWS, word_tables

    vocab = vocabulary(5000)
    torch.manual_seed(0)
    module = TrainedModel(model_config(), vocab).eval()
    layer, head = 0, 1
    word_tables(module, layer, head, 5)  # once, for what its first run of torch's kernels maps (code, buffers)
    with peak_growth() as peak:
        data = word_tables(module, layer, head, 5)
    assert peak["mb"] < SMALL_PEAK_MB, f"the word tables took {peak['mb']:.0f} MB"
    model, rows = module.model, MAX_ROWS
    block, s = model.blocks[layer], slice(head * 8, (head + 1) * 8)
    attention = block.attention
    with torch.no_grad():
        x = model.token_embedding.weight.double() * block.norm_attention.weight.double()  # (vocab, d_model)
        q, k = x @ attention.W_query.weight.double()[s].T, x @ attention.W_key.weight.double()[s].T
        qk = q[:rows] @ k.T
        written = (x[:rows] @ attention.W_value.weight.double()[s].T) @ attention.out_proj.weight.double()[:, s].T
        ov = (written * model.final_norm.weight.double()) @ model.lm_head.weight.double().T
    assert data["rows"] == rows and len(data["qk"]) == len(data["ov"]) == rows
    for table, matrix in (("qk", qk), ("ov", ov)):
        values, columns = matrix.topk(5)
        assert [[word for word, _ in row["top"]] for row in data[table]] == [[vocab[c] for c in row] for row in
                                                                              columns.tolist()]
        got = [value for row in data[table] for _, value in row["top"]]
        assert got == pytest.approx(values.round(decimals=4).flatten().tolist(), abs=1e-9)
