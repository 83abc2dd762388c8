"""Smeared keys (Olsson et al. 2022): each key mixed with the previous one, a learned share per head. Checked
against a float64 reference written here, on the fused path and the weights path alike; causal; refused with
one line where a variant has no keys of its own."""

from __future__ import annotations

import math

import pytest
import torch

from attention_lab.attention import build_attention
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.hooks import capture
from attention_lab.attention.smeared_keys import SmearedKeys
from conftest import compose_config


def reference_multihead(module, x: torch.Tensor) -> torch.Tensor:
    """Causal multi-head attention with smeared keys, loop by loop in float64: (T, d) -> (T, d)."""
    t, _ = x.shape
    heads, kv_heads, d = module.num_heads, module.kv_heads, module.head_dim
    q = x @ module.W_query.weight.T
    k = x @ module.W_key.weight.T
    v = x @ module.W_value.weight.T
    outputs = []
    for h in range(heads):
        g = h // (heads // kv_heads)  # the kv head of query head h
        share = 1 / (1 + math.exp(-float(module.smeared_keys.alpha[g].detach())))
        keys = [share * k[j, g * d:(g + 1) * d] + (1 - share) * (k[j - 1, g * d:(g + 1) * d] if j else 0)
                for j in range(t)]
        rows = []
        for i in range(t):
            scores = torch.stack([q[i, h * d:(h + 1) * d] @ keys[j] / math.sqrt(d) for j in range(i + 1)])
            weights = torch.softmax(scores, 0)
            rows.append(sum(weights[j] * v[j, g * d:(g + 1) * d] for j in range(i + 1)))
        outputs.append(torch.stack(rows))
    return torch.cat(outputs, dim=-1) @ module.out_proj.weight.T + module.out_proj.bias


@pytest.mark.parametrize("kv_heads", [None, 2])
def test_smeared_keys_match_the_float64_reference_on_both_paths(kv_heads):
    torch.manual_seed(0)
    module = build_attention("multihead", d_in=8, d_out=8, num_heads=4, kv_heads=kv_heads, causal=True,
                             smeared_keys=True).double()
    with torch.no_grad():
        module.smeared_keys.alpha.copy_(torch.randn(module.kv_heads) * 2)  # a share of its own for each head
    x = torch.randn(6, 8, dtype=torch.float64)
    expected = reference_multihead(module, x)
    fused = module(x).context
    with capture(module, points=("weights",)) as cache:
        explicit = module(x).context
    assert "hook_weights" in next(iter(cache))  # the weights path ran
    assert torch.allclose(fused, expected, atol=1e-12)
    assert torch.allclose(explicit, expected, atol=1e-12)


def test_alpha_starts_at_an_even_mix_and_the_first_key_has_no_previous():
    smear = SmearedKeys(heads=2)
    k = torch.arange(12, dtype=torch.float32).view(1, 2, 3, 2)  # (B, H, T, d)
    smeared = smear(k)
    assert smear.mix().tolist() == [0.5, 0.5]
    assert torch.equal(smeared[..., 0, :], 0.5 * k[..., 0, :])  # k_{-1} = 0
    assert torch.equal(smeared[..., 1:, :], 0.5 * k[..., 1:, :] + 0.5 * k[..., :-1, :])


def test_a_smeared_key_reads_its_own_position_and_the_one_before_only():
    torch.manual_seed(0)
    smear = SmearedKeys(heads=3)
    with torch.no_grad():
        smear.alpha.copy_(torch.randn(3))
    k = torch.randn(2, 3, 7, 4)
    changed = k.clone()
    changed[..., 3, :] += 1.0
    moved = (smear(changed) - smear(k)).abs().sum((0, 1, 3)) > 0  # (T,): which smeared keys changed
    assert moved.tolist() == [False, False, False, True, True, False, False]


def test_the_model_with_smeared_keys_stays_causal():
    from attention_lab.config import ModelConfig
    from attention_lab.model import SequenceModel

    torch.manual_seed(0)
    model = SequenceModel(ModelConfig(name="multihead", d_model=16, num_heads=2, layers=1, mask="causal",
                                      smeared_keys=True), vocab_size=12)
    tokens = torch.tensor([[3, 4, 5, 6, 7, 8]])
    changed = tokens.clone()
    changed[0, 4] = 9
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert torch.equal(before[0, :4], after[0, :4])  # positions before the change see none of it
    assert not torch.equal(before[0, 4:], after[0, 4:])


def test_the_knob_reaches_the_model_and_its_alpha_is_learned():
    from hydra.utils import instantiate

    def alphas(knob: str) -> list[str]:
        cfg = compose_config(["experiment=induction_formation", "layers=1", "task.train_size=64",
                              "task.val_size=16", f"smeared_keys={knob}"])
        datamodule = instantiate(cfg.data)
        module = instantiate(cfg.module, vocab=datamodule.vocab.itos)
        return [name for name, p in module.named_parameters() if "smeared_keys" in name and p.requires_grad]

    assert alphas("true") == ["model.blocks.0.attention.smeared_keys.alpha"]
    assert alphas("false") == []


def test_variants_without_learned_keys_refuse_it_with_one_line():
    from attention_lab.checks import validate
    from attention_lab.errors import ConfigError

    with pytest.raises(AttentionArgumentError, match="smeared_keys"):
        build_attention("linear", d_in=8, d_out=8, smeared_keys=True)
    with pytest.raises(ConfigError) as err:
        validate(compose_config(["model=linear", "smeared_keys=true"]))
    message = str(err.value)
    assert "\n" not in message and message.startswith("smeared_keys=true is invalid for model=linear")
    assert "'multihead'" in message  # what it is for
    validate(compose_config(["model=multihead", "smeared_keys=true"]))  # accepted


def accepting_variants() -> list[str]:
    from attention_lab.attention import ATTENTION_REGISTRY
    from attention_lab.attention.arguments import accepts_smeared_keys

    return sorted(name for name, cls in ATTENTION_REGISTRY.items() if accepts_smeared_keys(cls))


@pytest.mark.parametrize("variant", accepting_variants())
def test_every_variant_that_takes_it_smears_on_both_paths_alike(variant):
    """Fused and weights paths agree, and the smear changes the output (a large α is the plain key)."""
    from attention_lab.attention import ATTENTION_REGISTRY

    torch.manual_seed(0)
    heads = 2 if ATTENTION_REGISTRY[variant].multi_head else 1  # what the class declares, not a list of names
    module = build_attention(variant, d_in=16, d_out=16, num_heads=heads, causal=True, smeared_keys=True).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    fused = module(x).context
    with capture(module, points=("weights",)):
        explicit = module(x).context
    assert torch.allclose(fused, explicit, atol=1e-10)
    with torch.no_grad():
        module.smeared_keys.alpha.fill_(60.0)  # σ(60) = 1 - 1e-26: the key alone
    plain = module(x).context
    assert not torch.allclose(fused, plain, atol=1e-6)
