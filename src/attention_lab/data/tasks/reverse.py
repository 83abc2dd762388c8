"""reverse: output the input words in reverse order."""

from typing import Any

from attention_lab.config import TaskConfig
from attention_lab.data.tasks.base import SequenceTransformTask, register_task


@register_task("reverse")
class ReverseTask(SequenceTransformTask):
    summary = "random word sequence → the same words reversed"
    lengths = "3–8"

    def head_score_kind(self, config: TaskConfig) -> str:
        return "reverse"  # each output reads its mirrored input: the anti-diagonal

    def transform(self, ids: list[int], options: Any) -> list[int]:
        return ids[::-1]
