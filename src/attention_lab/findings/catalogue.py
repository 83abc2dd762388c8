"""The findings the README and docs/experiments.md state, each declared once: the sweep that measures it (its
overrides, without ``seed``), the seeds it was measured on, the metrics read from each job's metrics.json, and its
claims.

The claims are the docs' sentences in checkable form, each as the docs state it; where the docs give a range "as
observed over the seeds", the claim is a :class:`~attention_lab.findings.claims.Range` over those seeds, which new
seeds may leave. A new finding is one entry of :data:`FINDINGS` (docs/development.md, "Adding a finding").
"""

from __future__ import annotations

from dataclasses import dataclass

from attention_lab.findings.claims import Claim, KOfN, Order, Predicate, Range


@dataclass(frozen=True)
class Finding:
    name: str
    title: str
    section: str  # the docs/experiments.md section that states it (its anchor)
    commands: tuple[tuple[str, ...], ...]  # one sweep's overrides each (no seed=): their jobs are pooled
    seeds: tuple[int, ...]  # the seeds the docs' claims were measured on
    metrics: tuple[str, ...]  # recorded per job in docs/results/<name>.json
    claims: tuple[Claim, ...]
    # settings swept only to pick each seed's best job (the race's lr and its ladder's max_steps): the claims read
    # that job per seed (attention_lab.findings.best_of)
    best_of: tuple[str, ...] = ()

    def command_lines(self, seeds: tuple[int, ...] | None = None) -> list[str]:
        """Each sweep as ``python scripts/train.py -m ...`` with its seeds."""
        seed = "seed=" + ",".join(map(str, seeds if seeds is not None else self.seeds))
        return ["python scripts/train.py -m " + " ".join((*command, seed)) for command in self.commands]


def solved(where: dict, k: int, n: int) -> KOfN:
    return KOfN(Predicate("steps_to_solve", "set"), k, n, where)


def unsolved(where: dict, k: int, n: int) -> KOfN:
    return KOfN(Predicate("steps_to_solve", "unset"), k, n, where)


SEEDS_0_19, SEEDS_0_9, SEEDS_0_4 = tuple(range(20)), tuple(range(10)), tuple(range(5))
ONE, TWO = {"layers": "1"}, {"layers": "2"}
SMEARED, PLAIN = {"smeared_keys": "true"}, {"smeared_keys": "false"}
CLAMPED, RELEASED = {"clamp_until": "null"}, {"clamp_until": "150"}
SINK_COMMON = ("task=induction", "mask=causal", "layers=2", "task.bos=true", "model.context_length=17",
               "max_steps=400", "~callbacks.early_stopping")
MLA_COMMON = ("task=recall", "task.options.pairs=5", "task.options.queries=3", "heads=4", "position=rope",
              "mask=causal", "max_steps=1200")
RACE_WIDTHS = (16, 32, 64)  # experiment=mqar's d_model
# The race's cells: in how many of seeds 0-2 some rate solved each width within the ladder (0: none did)
RACE_SOLVED = {"multihead": (2, 3, 3), "linear": (0, 0, 0), "sigmoid": (0, 0, 0), "conv": (0, 0, 0),
               "retnet": (0, 1, 3), "based": (3, 3, 3), "mamba2": (3, 3, 3), "gated_deltanet": (3, 3, 3)}
SINKS = {"multihead": {"model": "multihead", "model.options.sink": "none"}, "gated": {"model": "gated"},
         "sink=learned": {"model.options.sink": "learned"}, "sink=zero": {"model.options.sink": "zero"}}

FINDINGS: tuple[Finding, ...] = (
    Finding("induction_heads", "Induction heads: two layers solve what one cannot", "induction-heads-why-two-layers",
            (("experiment=induction_heads",),), SEEDS_0_19,
            ("head_score/induction/max", "val/in_context_score", "val/seq_acc", "val/token_acc", "steps_to_solve"),
            (solved(TWO, 20, 20), Range("steps_to_solve", 150, 350, SEEDS_0_19, TWO),
             KOfN(Predicate("val/seq_acc", "<", 0.99), 20, 20, ONE), Range("val/seq_acc", 0.60, 0.92, SEEDS_0_19, ONE),
             Range("val/token_acc", 0.88, 0.98, SEEDS_0_19, ONE),
             Range("val/in_context_score", -0.31, -0.03, SEEDS_0_19, ONE),
             Range("head_score/induction/max", 0.49, 0.58, SEEDS_0_19, ONE))),
    Finding("induction_formation", "Induction heads form during training, in two layers only",
            "induction-heads-forming", (("experiment=induction_formation",),), SEEDS_0_19,
            ("formation_step", "loss_drop_step", "val/in_context_score", "val/seq_acc", "val/token_acc",
             "steps_to_solve"),
            (KOfN(Predicate("formation_step", "set"), 20, 20, TWO), KOfN(Predicate("formation_step", "unset"), 20, 20, ONE),
             Range("formation_step", 110, 270, SEEDS_0_19, TWO), solved(TWO, 17, 20),
             Range("steps_to_solve", 170, 390, SEEDS_0_19, TWO, where_set=True), KOfN(Predicate("val/seq_acc", "<", 0.99), 20, 20, ONE),
             Range("val/seq_acc", 0.49, 0.73, SEEDS_0_19, ONE), Range("loss_drop_step", 50, 70, SEEDS_0_19))),
    Finding("induction_clamp", "Clamping layer 0: no induction while clamped, induction after the release",
            "clamping-heads-during-training", (("experiment=induction_clamp", "max_steps=600"),), SEEDS_0_4,
            ("formation_step", "val/seq_acc", "steps_to_solve"),
            (KOfN(Predicate("formation_step", "unset"), 5, 5, CLAMPED), unsolved(CLAMPED, 5, 5),
             KOfN(Predicate("formation_step", ">", 150), 5, 5, RELEASED), solved(RELEASED, 5, 5),
             Range("formation_step", 220, 250, SEEDS_0_4, RELEASED),
             Range("val/seq_acc", 0.69, 0.83, SEEDS_0_4, CLAMPED))),
    Finding("smeared_keys", "Smeared keys: one layer forms an induction head", "smeared-keys-one-layer-induction-heads",
            (("experiment=induction_formation", "layers=1", "smeared_keys=false,true"),), SEEDS_0_9,
            ("val/seq_acc", "val/in_context_score", "val/loss", "val/token_acc", "steps_to_solve",
             "head_score/induction/max", "head_score/prefix_matching/max", "formation_step"),
            (solved(SMEARED, 10, 10), unsolved(PLAIN, 10, 10), Range("steps_to_solve", 130, 170, SEEDS_0_9, SMEARED),
             KOfN(Predicate("formation_step", "set"), 10, 10, SMEARED),
             KOfN(Predicate("formation_step", "unset"), 10, 10, PLAIN),
             Range("formation_step", 80, 110, SEEDS_0_9, SMEARED),
             Range("val/in_context_score", -0.32, -0.12, SEEDS_0_9, PLAIN),
             Range("head_score/induction/max", 0.72, 0.78, SEEDS_0_9, SMEARED),
             Range("head_score/induction/max", 0.48, 0.56, SEEDS_0_9, PLAIN),
             KOfN(Predicate("head_score/induction/max", ">=", 0.5), 9, 10, PLAIN),
             Range("head_score/prefix_matching/max", 0.50, 0.59, SEEDS_0_9, SMEARED),
             Range("head_score/prefix_matching/max", 0.25, 0.28, SEEDS_0_9, PLAIN))),
    Finding("length_generalisation", "Length generalisation: rope > alibi > none ≈ sinusoidal > learned",
            "length-generalisation-which-positions-carry-over", (("experiment=length_generalisation",),), SEEDS_0_4,
            ("ood/seq_acc", "ood/token_acc", "val/seq_acc", "steps_to_solve"),
            (Order("ood/seq_acc", (("rope",), ("alibi",), ("none", "sinusoidal"), ("learned",)), 5, 5, by="position"),
             Range("ood/seq_acc", 0.998, 1.0, SEEDS_0_4, {"position": "rope"}),
             Range("ood/seq_acc", 0.61, 0.69, SEEDS_0_4, {"position": "alibi"}),
             Range("ood/seq_acc", 0.19, 0.26, SEEDS_0_4, {"position": "none"}),
             Range("ood/seq_acc", 0.17, 0.19, SEEDS_0_4, {"position": "sinusoidal"}),
             Range("ood/seq_acc", 0.006, 0.018, SEEDS_0_4, {"position": "learned"}))),
    Finding("kv_heads", "Grouped-query attention: fewer K/V heads, fewer solved lookups", "grouped-query-attention-what-"
            "sharing-keys-and-values-costs", (("experiment=kv_heads",),), SEEDS_0_4,
            ("val/seq_acc", "val/token_acc", "steps_to_solve"),
            (solved({"kv_heads": "4"}, 5, 5), Range("steps_to_solve", 1150, 2550, SEEDS_0_4, {"kv_heads": "4"}),
             unsolved({"kv_heads": "2"}, 4, 5), unsolved({"kv_heads": "1"}, 5, 5))),
    Finding("mla_equal_cache", "MLA at equal KV cache: level with grouped-query attention",
            "multi-head-latent-attention-at-equal-kv-cache",
            ((*MLA_COMMON, "model=multihead", "kv_heads=2"),
             (*MLA_COMMON, "model=mla", "model.options.kv_latent=42", "model.options.latent_norm=false")), (0, 1),
            ("val/seq_acc", "val/token_acc"),
            (KOfN(Predicate("val/seq_acc", "<", 0.99), 2, 2, {"model": "multihead"}),
             KOfN(Predicate("val/seq_acc", "<", 0.99), 2, 2, {"model": "mla"}),
             Range("val/seq_acc", 0.660, 0.674, (0, 1), {"model": "multihead"}),
             Range("val/seq_acc", 0.662, 0.672, (0, 1), {"model": "mla"}))),
    Finding("sinks", "Attention sinks: a sink halves the first token's attention, a gate does not",
            "attention-sinks-the-first-token-a-learned-sink-and-a-gate",
            ((*SINK_COMMON, "model=multihead", "+model.options.sink=none"),
             (*SINK_COMMON, "model=multihead", "+model.options.sink=learned"),
             (*SINK_COMMON, "model=multihead", "+model.options.sink=zero"), (*SINK_COMMON, "model=gated")),
            (0, 1, 2), ("head_score/first_token/max", "val/seq_acc"),
            (Order("head_score/first_token/max", (("multihead", "gated"), ("sink=learned", "sink=zero")), 3, 3,
                   configurations=SINKS),)),
    Finding("recall_race", "The recall race: what each mixer needs to recall (MQAR), every rate and a ladder of steps",
            "the-race-experimentmqar", (("experiment=mqar",),), (0, 1, 2),
            ("val/token_acc", "val/seq_acc", "steps_to_solve", "state_size"),
            (*(solved({"model": mixer, "d_model": str(width)}, k, 3) if k else
               unsolved({"model": mixer, "d_model": str(width)}, 3, 3)
               for mixer, ks in RACE_SOLVED.items() for width, k in zip(RACE_WIDTHS, ks, strict=True)),
             Range("steps_to_solve", 200, 300, (0, 1, 2), {"model": "based"})),
            best_of=("lr", "max_steps")),
)
