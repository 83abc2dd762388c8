"""The clamp knobs' rules (analysis/clamp.py): which heads a pattern names, and each bad setting refused in one line
naming the knob, by the config checks, before a run dir exists."""

from __future__ import annotations

import pytest

from attention_lab.analysis.clamp import Window, resolve
from attention_lab.checks import validate
from attention_lab.errors import ConfigError
from conftest import compose_config, run_train


@pytest.mark.parametrize(("patterns", "heads"), [
    (["layer0/head*"], [(0, 0), (0, 1), (0, 2)]),
    (["layer*/head1"], [(0, 1), (2, 1)]),                      # layer 1 has no heads of its own: skipped
    (["layer*/head*"], [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1), (2, 2)]),
    (["layer2/head2", "layer0/head0", "layer2/head*"], [(0, 0), (2, 0), (2, 1), (2, 2)]),  # sorted, each once
    ([], []),
])
def test_patterns_name_the_heads_of_the_layers_with_heads_of_their_own(patterns, heads):
    assert resolve(patterns, {0: 3, 2: 3}, layers=3) == heads


def test_the_window_holds_from_clamp_from_up_to_clamp_until():
    assert [step for step in range(8) if Window(2, 5).holds(step)] == [2, 3, 4]
    assert [step for step in range(8) if Window(6).holds(step)] == [6, 7]


@pytest.mark.parametrize(("overrides", "start"), [
    (["clamp=[layer2/head0]"], "clamp=[layer2/head0] is invalid: layer2/head0 names layer 2, and the model has "
                               "layers 0..1 (layers=2)"),
    (["clamp=[layer0/head4]"], "clamp=[layer0/head4] is invalid: layer0/head4 names head 4, and layer 0 has heads "
                               "0..3 (heads=4)"),
    (["clamp=[layer*/head9]"], "clamp=[layer*/head9] is invalid: layer*/head9 names head 9"),
    (["clamp=[layer0/head*,lyer1/head2]"], "clamp=[layer0/head*,lyer1/head2] is invalid: 'lyer1/head2' is not a "
                                           "head: write layer<l>/head<h>"),
    (["clamp=[layer0]"], "clamp=[layer0] is invalid: 'layer0' is not a head"),
    (["clamp=[layer0/head-1]"], "clamp=[layer0/head-1] is invalid: 'layer0/head-1' is not a head"),
    (["clamp=[layer0/head*]", "clamp_from=150", "clamp_until=150"], "clamp_until=150 is invalid: it must be a step > "
                                                                    "clamp_from=150"),
    (["clamp=[layer0/head*]", "clamp_from=200", "clamp_until=150"], "clamp_until=150 is invalid"),
    (["clamp=[layer0/head*]", "clamp_from=-1"], "clamp_from=-1 is invalid: it must be a step >= 0"),
    (["model=simple", "clamp=[layer0/head0]"], "clamp=[layer0/head0] is invalid: model=simple has no heads with "
                                               "weights of their own"),
    (["mixers=[simple,self]", "heads=1", "clamp=[layer0/head0]"], "clamp=[layer0/head0] is invalid: layer0/head0 "
                                                                  "names layer 0, whose heads have no weights of "
                                                                  "their own (mixers[0]=simple)"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_bad_clamp_is_one_line_naming_the_knob(overrides, start):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(overrides))
    assert str(err.value).startswith(start) and "\n" not in str(err.value)


def test_a_misspelt_head_gets_the_nearest_pattern():
    with pytest.raises(ConfigError) as err:
        validate(compose_config(["clamp=[layer0]"]))
    assert str(err.value).endswith("; did you mean layer0/head*?")


@pytest.mark.parametrize("overrides", [
    ["clamp=[layer0/head*]"], ["clamp=[layer*/head*]", "clamp_kind=mean", "clamp_from=10", "clamp_until=11"],
    ["mixers=[mamba2,gated_deltanet]", "mask=causal", "clamp=[layer*/head*]"],
    ["mixers=[simple,self]", "heads=1", "clamp=[layer*/head*]"], ["clamp_until=3"],
], ids=" ".join)
def test_accepted_clamps(overrides):
    validate(compose_config(overrides))


def test_a_bad_clamp_stops_the_run_before_its_dir_exists(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_train(run_dir, "clamp=[layer0/head7]", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == ("error: clamp=[layer0/head7] is invalid: layer0/head7 names head "
                                                    "7, and layer 0 has heads 0..3 (heads=4)")
    assert not run_dir.exists()
