"""A top-level knob of the wrong type (``heads=two``, ``mask=diagonal``) is refused before Hydra starts.

A knob's type belongs to the schema (:class:`attention_lab.config.TrainConfig`), whatever the presets and groups
set, so the command line alone decides it. ``@hydra.main`` composes the config twice before the app sees it (once
to read ``hydra.mode``, once for the run) and the first composition swallows the error, so finding it here saves
two compositions. The values are parsed by Hydra's own override grammar and checked by OmegaConf's typed nodes,
as Hydra's composition would; everything else (sweeps, groups, ``+``/``~``, nested keys) is left to Hydra.
"""

from __future__ import annotations

from collections.abc import Sequence

from attention_lab.run.overrides import is_override


def check_knob_types(argv: Sequence[str]) -> None:
    """Raises OmegaConf's ValidationError for a top-level knob typed with a value its schema field refuses."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from omegaconf import OmegaConf

    from attention_lab.config import TrainConfig, knob_names

    knobs = set(knob_names())
    overrides = [o for o in OverridesParser.create().parse_overrides([a for a in argv if is_override(a)])
                 if o.type is OverrideType.CHANGE and o.package is None and not o.is_sweep_override()
                 and o.key_or_group in knobs]
    if not overrides:
        return
    schema = OmegaConf.structured(TrainConfig)
    for override in overrides:
        schema[override.key_or_group] = override.value()
