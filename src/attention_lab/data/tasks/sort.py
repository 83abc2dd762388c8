"""sort: output the input words in vocabulary order (ids are in vocabulary order, so sorting ids sorts words)."""

from typing import Any

from attention_lab.data.tasks.base import SequenceTransformTask, register_task


@register_task("sort")
class SortTask(SequenceTransformTask):
    summary = "random word sequence → its words in vocabulary order"
    lengths = "3–8"

    def transform(self, ids: list[int], options: Any) -> list[int]:
        return sorted(ids)
