"""Each variant says what it is once, in its class; the config checks read those declarations without torch and
apply the attention package's own rules. A variant with an option of its own is one file and one yaml."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from attention_lab.attention import ATTENTION_REGISTRY, AttentionArgumentError, build_attention
from attention_lab.attention.arguments import accepted_positions
from attention_lab.attention.declared import FACT_NAMES, declared_variants, facts_of
from attention_lab.attention.positions import INSIDE_ATTENTION
from attention_lab.checks import validate
from attention_lab.config import ModelConfig, typed
from attention_lab.errors import ConfigError
from attention_lab.run.preflight import check_run
from conftest import CONFIG_DIR, check_command_line, compose_config, run_train

MODELS = sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml"))
FIRST_OF_EACH_HEADS_KIND = {next(m for m in MODELS if ATTENTION_REGISTRY[m].multi_head == several)
                            for several in (True, False)}
# (model, knob): each variant whose class rejects the knob, and one that takes it (the other path of the rule).
REJECTS_ROWS = [(model, knob) for knob in ("window", "dropout") for model in MODELS
                if knob in ATTENTION_REGISTRY[model].rejects or
                model == next(m for m in MODELS if knob not in ATTENTION_REGISTRY[m].rejects)]


def model_config(node) -> ModelConfig:
    """The composed model node, resolved, as the ModelConfig the LightningModule receives."""
    return typed(ModelConfig, OmegaConf.to_container(node, resolve=True))


def test_the_source_reader_finds_what_the_classes_declare():
    """What the torch-free checks read is what the imported classes say, fact by fact."""
    declared = declared_variants()
    assert sorted(declared) == sorted(ATTENTION_REGISTRY) == MODELS
    for name, cls in ATTENTION_REGISTRY.items():
        assert declared[name] == facts_of(name, cls), name
    assert {"takes_source", "multi_head", "grouped_kv", "projects", "learned_heads", "rejects"} <= set(FACT_NAMES)


@pytest.mark.parametrize("model", MODELS)
def test_the_composed_model_follows_its_class(model):
    """Moved from the yaml-declaration test: the yamls no longer declare facts, the config derives them."""
    cfg = compose_config([f"model={model}"]).model
    cls = ATTENTION_REGISTRY[cfg.name]
    config = model_config(cfg)
    assert config.encoder_decoder == cls.takes_source
    heads_with_weights = any(True for _ in build_attention(cfg.name, d_in=8, d_out=8, causal=cls.causal_only).parameters())
    assert config.learned_heads == heads_with_weights  # heads with weights of their own: something to ablate
    positions = accepted_positions(cls)
    assert ("rope" in positions) == ("alibi" in positions) == (cls.projects and not cls.takes_source)
    assert cfg.num_heads == (4 if cls.multi_head else 1)  # `heads` sets only the heads of a multi-head variant
    if model in FIRST_OF_EACH_HEADS_KIND:  # one variant with several heads and one with a single head
        assert compose_config([f"model={model}", "heads=2"]).model.num_heads == (2 if cls.multi_head else 1)


@pytest.mark.parametrize(("model", "knob"), REJECTS_ROWS, ids=[f"{k}-{m}" for m, k in REJECTS_ROWS])
def test_what_a_variant_rejects_is_refused_by_the_config_and_by_build_attention(model, knob):
    """Moved from the mixers' yaml test: one declaration (``rejects``), refused on both paths."""
    rejected = knob in declared_variants()[model].rejects
    kwargs = {"d_in": 4, "d_out": 4, knob: 2 if knob == "window" else 0.1}
    if rejected:
        with pytest.raises(AttentionArgumentError) as err:
            build_attention(model, **kwargs)
        assert err.value.argument == knob
    else:
        build_attention(model, **kwargs)
    setting = "window=2" if knob == "window" else "model.dropout=0.1"
    cfg = compose_config([f"model={model}", setting, "mask=none"])
    if rejected:
        with pytest.raises(ConfigError, match=rf"^{setting} is invalid for model={model}: "):
            validate(cfg)
    else:
        validate(cfg)


def test_positions_are_listed_once():
    from attention_lab.config import Position

    assert set(INSIDE_ATTENTION) < {p.value for p in Position}
    cfg = compose_config(["position=rope", "model=simple"])
    with pytest.raises(ConfigError, match=r"^position=rope is invalid for model=simple: it must be one of none, "
                                          r"learned, sinusoidal for 'simple' \(it has no query/key projections\)$"):
        validate(cfg)


def test_a_saved_model_config_loads_as_saved_and_nothing_else():
    """A checkpoint's hparams (to_dict) give the same config back; a field the schema lacks (a variant's fact, which
    its class declares) is refused, not dropped."""
    from omegaconf.errors import ConfigKeyError

    from attention_lab.config import Mask

    config = ModelConfig(name="simple", d_model=8, num_heads=1, layers=1, mask=Mask.none, options={"normalize": "sum"})
    saved = config.to_dict()
    assert saved["mask"] == "none" and saved["options"] == {"normalize": "sum"} and "learned_heads" not in saved
    loaded = ModelConfig.from_dict(saved)
    assert loaded == config and not loaded.learned_heads  # simple's class declares it; no field holds it
    with pytest.raises(ConfigKeyError, match="learned_heads"):
        ModelConfig.from_dict({**saved, "learned_heads": False})


def test_an_option_only_its_class_can_check_fails_before_the_run():
    """sigmoid's score_bias has no fixed set of values: its class checks it, when the preflight builds one block."""
    cfg = compose_config(["model=sigmoid", "model.options.score_bias=nan", "device=cpu"])
    with pytest.raises(ConfigError, match=r"^model\.options\.score_bias=nan is invalid for model=sigmoid: it must be "
                                          r"a finite number, or None for -log\(T_k\)$"):
        check_run(cfg)
    check_run(compose_config(["model=sigmoid", "model.options.score_bias=-1.5", "device=cpu"]))


# --- one name per knob: a knob the variant cannot use is not ignored on a single run's command line ---------------

def test_heads_on_a_single_head_variant_is_an_error_for_a_single_run():
    with pytest.raises(ConfigError) as err:
        check_command_line(["model=self", "heads=3"], CONFIG_DIR)
    message = str(err.value)
    assert message.startswith("heads=3 is invalid for model=self: it must be 1 for 'self'") and "\n" not in message
    check_command_line(["model=self", "heads=1", "device=cpu"], CONFIG_DIR)  # what it trains anyway
    check_command_line(["model=self", "device=cpu"], CONFIG_DIR)  # the default heads=4 is the multi-head default


def test_a_sweep_job_of_a_single_head_variant_is_the_job_with_one_head():
    """A sweep over a product (model=self,multihead heads=1,2) composes model=self heads=2 as a config with one
    head: it trains what model=self heads=1 trains, and validates."""
    two, one = compose_config(["model=self", "heads=2"]), compose_config(["model=self", "heads=1"])
    validate(two)
    assert model_config(two.model) == model_config(one.model)


def test_heads_on_a_single_head_variant_is_one_line_from_the_script(tmp_path):
    proc = run_train(tmp_path / "run", "model=cross", "heads=2", check=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: heads=2 is invalid for model=cross: it must be 1 for 'cross'"), lines[0]
    assert not (tmp_path / "run").exists()


# --- a variant with an option of its own: one file and one yaml ------------------------------------------------
