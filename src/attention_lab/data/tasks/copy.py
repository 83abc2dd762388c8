"""copy: output the input sequence unchanged."""

from attention_lab.data.tasks.base import SequenceTransformTask, register_task


@register_task("copy")
class CopyTask(SequenceTransformTask):
    def transform(self, ids: list[int]) -> list[int]:
        return list(ids)
