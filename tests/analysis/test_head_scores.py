"""Head scores: the detectors on hand-made attention patterns, their grid, and the TensorBoard heatmaps."""

from __future__ import annotations

import io
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attention_lab.analysis.head_scores import (
    BATCH_KINDS,
    HEAD_SCORE_KINDS,
    head_scores,
    induction_pattern,
    induction_score,
    previous_token_score,
    self_score,
)
from attention_lab.analysis.tags import score_grid
from attention_lab.attention.hooks import capture
from attention_lab.callbacks.head_score_maps import HeadScoreMaps, image_tag, score_image


def one_hot_rows(keys: list[int], t: int) -> torch.Tensor:
    """(T, T) weights: query i attends only to keys[i]."""
    return torch.eye(t)[keys]


def test_a_previous_token_head_and_a_self_head():
    t = 4
    previous = one_hot_rows([0, 0, 1, 2], t)  # query 0 has no previous token; it attends to itself
    diagonal = torch.eye(t)
    weights = torch.stack([previous, diagonal])[None]  # (1, 2, 4, 4)
    real = torch.ones(1, t, dtype=torch.bool)
    assert previous_token_score(weights, None, real).tolist() == [1.0, 0.0]
    # The self head attends to itself at all 4 queries, the previous-token head only at query 0.
    assert self_score(weights, None, real).tolist() == [0.25, 1.0]


def test_padding_queries_are_left_out():
    uniform = torch.full((1, 1, 3, 3), 1 / 3)
    weights = torch.cat([torch.eye(3)[None, None], uniform], dim=0)  # batch of 2, one head
    real = torch.tensor([[True, True, True], [True, False, False]])
    # Self: rows 0..2 of sample 0 give 1 each, row 0 of sample 1 gives 1/3; the padded rows are not counted.
    assert self_score(weights, None, real).item() == pytest.approx((3 + 1 / 3) / 4)
    # Previous token: queries 1 and 2 of sample 0 only (sample 1's query 1 is padding).
    assert previous_token_score(weights, None, real).item() == pytest.approx(0.0)


def test_induction_pattern_marks_the_key_after_each_earlier_occurrence():
    tokens = torch.tensor([[5, 6, 7, 5, 6, 7, 0]])
    real = tokens != 0
    pattern = induction_pattern(tokens, real)[0]
    marked = {(q, k) for q, k in pattern.nonzero().tolist()}
    assert marked == {(3, 1), (4, 2), (5, 3)}


def test_an_induction_head_scores_one_and_others_less():
    tokens = torch.tensor([[5, 6, 7, 5, 6, 7]])
    real = torch.ones_like(tokens, dtype=torch.bool)
    induction = one_hot_rows([0, 0, 0, 1, 2, 3], 6)  # queries 3, 4, 5 read the word after their earlier copy
    previous = one_hot_rows([0, 0, 1, 2, 3, 4], 6)
    half = (induction + previous) / 2
    weights = torch.stack([induction, previous, half])[None]
    assert induction_score(weights, tokens, real).tolist() == pytest.approx([1.0, 0.0, 0.5])


def test_no_repeated_token_means_no_induction_score():
    tokens = torch.tensor([[1, 2, 3, 0]])
    weights = torch.full((1, 2, 4, 4), 0.25)
    scores = head_scores(weights, tokens, tokens != 0)
    # induction and duplicate_token score only the queries whose token occurred earlier: none here, so no score.
    # These four score every real query (reverse: each has a mirror). A subset, not the whole list: a kind
    # added to head_scores.DETECTORS later may or may not have a score here.
    assert set(scores) <= set(BATCH_KINDS) and not {"induction", "duplicate_token"} & set(scores)
    assert {"previous_token", "self", "reverse", "first_token"} <= set(scores)
    assert scores["self"].tolist() == pytest.approx([0.25, 0.25])


def reverse_reference(weights: list, tokens: list[list[int]]) -> list[float]:
    """The reverse score by its definition, in plain Python: for each sequence, its real (non-pad) positions
    p_0 < ... < p_{L-1}; query p_i's weight on key p_{L-1-i}, averaged over every real query of the batch."""
    heads = len(weights[0])
    totals, count = [0.0] * heads, 0
    for b, row in enumerate(tokens):
        positions = [t for t, token in enumerate(row) if token != 0]
        for i, query in enumerate(positions):
            key = positions[len(positions) - 1 - i]
            count += 1
            for h in range(heads):
                totals[h] += weights[b][h][query][key]
    return [total / count for total in totals]


def test_reverse_score_against_a_reference_by_definition():
    from attention_lab.analysis.head_scores import reverse_score

    generator = torch.Generator().manual_seed(0)
    # Lengths 1..7 of 7, padding at the end, and one sequence with a pad inside (the mirror is among real tokens).
    tokens = torch.tensor([[3, 4, 5, 6, 7, 8, 9], [3, 4, 5, 0, 0, 0, 0], [5, 0, 0, 0, 0, 0, 0],
                           [3, 4, 5, 6, 0, 0, 0], [3, 0, 4, 5, 6, 7, 0]])
    weights = torch.rand(5, 3, 7, 7, generator=generator).softmax(-1)
    expected = reverse_reference(weights.tolist(), tokens.tolist())
    assert reverse_score(weights, tokens, tokens != 0).tolist() == pytest.approx(expected, rel=1e-6)
    # A head that reads the mirrored word scores 1, the previous-token and the self head score less.
    t = 6
    tokens = torch.arange(3, 3 + t)[None]
    mirror, previous, diagonal = one_hot_rows(list(range(t - 1, -1, -1)), t), one_hot_rows([0, 0, 1, 2, 3, 4], t), torch.eye(t)
    scores = head_scores(torch.stack([mirror, previous, diagonal])[None], tokens, tokens != 0)["reverse"]
    assert scores.tolist() == pytest.approx([1.0, 1 / 6, 0.0])


def test_score_grid_is_layers_by_heads():
    metrics = {"head_score/self/layer0/head0": 0.1, "head_score/self/layer0/head1": 0.2,
               "head_score/self/layer1/head0": 0.3, "head_score/self/layer1/head1": 0.4,
               "head_score/induction/layer1/head0": 0.9, "val/loss": 1.0}
    assert score_grid(metrics, "self") == [[0.1, 0.2], [0.3, 0.4]]
    grid = score_grid(metrics, "induction")
    assert math.isnan(grid[0][0]) and grid[1][0] == 0.9
    assert score_grid(metrics, "previous_token") is None


FINAL_VALIDATION = SimpleNamespace(fn="validate")  # trainer.validate() after training: always drawn
DURING_TRAINING = SimpleNamespace(fn="fit")


def tensorboard_logger(tmp_path):
    from lightning.pytorch.loggers import TensorBoardLogger

    return TensorBoardLogger(save_dir=str(tmp_path), name="", version="")


def one_score_trainer(logger, step: int, state, sanity_checking: bool = False) -> SimpleNamespace:
    """What the callback reads of a trainer: one head's self score of 0.5 logged at ``step``."""
    return SimpleNamespace(loggers=[logger], global_step=step, sanity_checking=sanity_checking, state=state,
                           callback_metrics={"head_score/self/layer0/head0": torch.tensor(0.5)})


def written_events(logger) -> EventAccumulator:
    logger.experiment.flush()
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0})
    events.Reload()
    return events


def test_during_training_only_every_n_steps(tmp_path):
    logger = tensorboard_logger(tmp_path)
    trainer = one_score_trainer(logger, 50, DURING_TRAINING)
    callback = HeadScoreMaps(every_n_steps=200)
    for step in (50, 100, 200, 250):
        trainer.global_step = step
        callback.on_validation_end(trainer, None)
    assert [image.step for image in written_events(logger).Images(image_tag("head_score/self"))] == [200]


def test_by_default_only_the_final_validation_is_drawn(tmp_path):
    logger = tensorboard_logger(tmp_path)
    callback = HeadScoreMaps()
    callback.on_validation_end(one_score_trainer(logger, 200, DURING_TRAINING), None)  # its scalars only
    callback.on_validation_end(one_score_trainer(logger, 250, FINAL_VALIDATION), None)
    assert [image.step for image in written_events(logger).Images(image_tag("head_score/self"))] == [250]


def test_callback_draws_one_heatmap_per_logged_kind(tmp_path):
    logger = tensorboard_logger(tmp_path)
    metrics = {f"head_score/{kind}/layer{layer}/head{h}": torch.tensor(value)
               for kind, value in (("self", 1.0), ("previous_token", 0.0))
               for layer in range(2) for h in range(3)}
    trainer = SimpleNamespace(loggers=[logger], global_step=7, sanity_checking=False, state=FINAL_VALIDATION,
                              callback_metrics={**metrics, "val/loss": torch.tensor(0.5)})
    HeadScoreMaps().on_validation_end(trainer, None)
    events = written_events(logger)
    assert set(events.Tags()["images"]) == {image_tag("head_score/self"), image_tag("head_score/previous_token")}
    self_image = events.Images(image_tag("head_score/self"))
    assert [image.step for image in self_image] == [7]
    pixels = np.asarray(Image.open(io.BytesIO(self_image[0].encoded_image_string)).convert("RGB"))
    # viridis at 1.0 is yellow (253, 231, 37), at 0.0 dark purple (68, 1, 84): each map shows its own colour.
    yellow = np.all(np.abs(pixels.astype(int) - [253, 231, 37]) < 8, axis=-1).sum()
    assert yellow > 6 * 100  # six cells of 32 x 32 pixels, less the annotation text
    previous = events.Images(image_tag("head_score/previous_token"))[0]
    other = np.asarray(Image.open(io.BytesIO(previous.encoded_image_string)))
    purple = np.all(np.abs(other[..., :3].astype(int) - [68, 1, 84]) < 8, axis=-1).sum()
    assert purple > 6 * 100


def test_callback_does_nothing_while_sanity_checking(tmp_path):
    logger = tensorboard_logger(tmp_path)
    HeadScoreMaps().on_validation_end(one_score_trainer(logger, 0, FINAL_VALIDATION, sanity_checking=True), None)
    assert written_events(logger).Tags()["images"] == []


def test_the_same_step_is_drawn_once(tmp_path):
    logger = tensorboard_logger(tmp_path)
    trainer = one_score_trainer(logger, 5, FINAL_VALIDATION)
    callback = HeadScoreMaps()
    callback.on_validation_end(trainer, None)
    callback.on_validation_end(trainer, None)  # the final validation after training: the same step
    trainer.global_step = 9
    callback.on_validation_end(trainer, None)
    assert [image.step for image in written_events(logger).Images(image_tag("head_score/self"))] == [5, 9]


@pytest.mark.parametrize("model", ["multihead", "cross"])
def test_the_module_logs_the_scores_of_the_first_validation_batch(tmp_path, model):
    from conftest import validated_untrained

    task = ["task=induction", "mask=causal"] if model == "multihead" else ["task=copy"]  # cross: no causal mask
    cfg, module, datamodule, (metrics,) = validated_untrained(
        [f"model={model}", *task, "task.train_size=64", "task.val_size=300", "d_model=16", "layers=2", "batch_size=8"],
        tmp_path)
    logged = {name: value for name, value in metrics.items() if name.startswith("head_score/")}
    if model == "cross":  # rows are output slots: no head scores
        assert logged == {}
        return
    heads = module.config.num_heads
    # Every registered kind, read from the registry: the induction task's batch repeats words (so induction and
    # duplicate_token have queries) and prefix_matching has its own probe.
    assert set(logged) == {f"head_score/{kind}/layer{layer}/head{h}" for kind in HEAD_SCORE_KINDS
                           for layer in range(2) for h in range(heads)}
    # The first batch (256 of the 300 examples), not the whole set: the scores of a forward pass over it.
    inputs = datamodule.val_set.tensors[0][:256]
    with torch.no_grad(), capture(module.model, points=("weights",)) as cache:
        module(inputs)
    weights = cache.layers("weights")
    real = inputs != 0
    for layer in range(2):
        # Causal attention: query 0 sees only itself, so its self weight is 1.
        assert weights[layer][:, :, 0, 0].allclose(torch.ones(1))
        previous = torch.stack([weights[layer][b, :, t, t - 1] for b in range(len(inputs))
                                for t in range(1, inputs.shape[1]) if real[b, t]]).mean(0)
        for h in range(heads):
            logged_value = logged[f"head_score/previous_token/layer{layer}/head{h}"]
            assert logged_value == pytest.approx(float(previous[h]), rel=1e-4)


def test_the_config_checks_know_every_kind():
    """checks.py stays torch-free and reads the kinds from head_scores (which imports no torch):
    optimized_metric=head_score/<kind>/... accepts exactly the kinds that are measured."""
    from attention_lab.analysis.head_scores import DETECTORS
    from attention_lab.checks import HEAD_SCORE_KINDS

    assert HEAD_SCORE_KINDS == tuple(DETECTORS)


def test_each_score_redrawn_in_the_shared_frame_is_the_image_of_a_figure_of_its_own():
    """The head scores share one frame per grid shape (drawn once, redrawn per kind): each image is, pixel for
    pixel, the one a new figure draws for it, also where a long run name makes the title set the width."""
    rng = np.random.default_rng(0)
    for run_name in ("a run", "model=multihead heads=4 d_model=64 lr=0.003 seed=12"):
        callback = HeadScoreMaps(run_name=run_name)
        for kind in ("self", "previous_token", "induction"):
            grid = rng.random((2, 3)).tolist()
            grid[1][2] = float("nan")  # a head without a score
            for step in (7, 1234567890):
                drawn = callback.image(grid, f"head_score/{kind}", step)
                assert np.array_equal(drawn, score_image(grid, f"head_score/{kind}", step, run_name)), (kind, step)
        assert len(callback.figures) == 1
