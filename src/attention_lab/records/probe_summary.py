"""The record the attention tab reads: for each logged step, one tensor summary (TensorBoard's
``DATA_CLASS_TENSOR``) under the tag ``attention_lab/probe`` holding the probe's weights of every layer and
head, (layers, heads, queries, keys) in float16, with the words in the summary's plugin metadata.

Written into an event file of its own in the run's TensorBoard dir (callbacks/probe_logging.py), so
TensorBoard's loaders read it as they read every other record of the run. Needs numpy and TensorBoard's protos, not torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from tensorboard.compat.proto import summary_pb2
from tensorboard.util import tensor_util

from attention_lab.records.run_names import PLUGIN_NAME

PROBE_TAG = "attention_lab/probe"
FORMAT_VERSION = 1


class RecordError(ValueError):
    """A summary whose metadata or tensor is not what this version writes (``field`` names the part)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


@dataclass(frozen=True)
class WordLayout:
    """The words along the two axes of every map of a tag."""

    query_words: list[str]  # rows: the probe's words, or output positions of an encoder-decoder model
    key_words: list[str]  # columns: the probe's words as the model saw them (<unk> for unknown ones)
    query_axis: str = "query"  # "output position" for encoder-decoder models
    kinds: tuple[str, ...] = ()  # each layer's attention kind (the colour scale follows it); () reads as softmax

    def to_content(self) -> bytes:
        return json.dumps({"version": FORMAT_VERSION, "query_words": self.query_words, "key_words": self.key_words,
                           "query_axis": self.query_axis, "kinds": list(self.kinds)}, ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_content(cls, content: bytes) -> WordLayout:
        try:
            data = json.loads(content.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RecordError("plugin content", f"not JSON ({type(err).__name__})") from None
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            found = data.get("version") if isinstance(data, dict) else type(data).__name__
            raise RecordError("plugin content", f"version {found!r}, this tab reads version {FORMAT_VERSION}")
        words = {key: data.get(key) for key in ("query_words", "key_words")}
        for key, value in words.items():
            if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
                raise RecordError(key, "not a list of words")
        kinds = data.get("kinds")
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise RecordError("kinds", "not a list of attention kinds")
        return cls(words["query_words"], words["key_words"], str(data.get("query_axis", "query")), tuple(kinds))


def summary_metadata(layout: WordLayout) -> summary_pb2.SummaryMetadata:
    return summary_pb2.SummaryMetadata(
        summary_description="attention of the probe sentence: every layer and head",
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME, content=layout.to_content()),
        data_class=summary_pb2.DATA_CLASS_TENSOR)


def probe_summary(weights: np.ndarray, layout: WordLayout) -> summary_pb2.Summary:
    """One step's record: ``weights`` (layers, heads, queries, keys)."""
    weights = np.asarray(weights, dtype=np.float16)
    if weights.ndim != 4 or weights.shape[2:] != (len(layout.query_words), len(layout.key_words)):
        raise RecordError("weights", f"shape {weights.shape} does not match {len(layout.query_words)} queries "
                                     f"x {len(layout.key_words)} keys")
    value = summary_pb2.Summary.Value(tag=PROBE_TAG, metadata=summary_metadata(layout),
                                      tensor=tensor_util.make_tensor_proto(weights))
    return summary_pb2.Summary(value=[value])


def check_weights(weights: np.ndarray, layout: WordLayout) -> np.ndarray:
    """A read tensor as float32 (layers, heads, queries, keys), or RecordError."""
    if weights.dtype.kind != "f":
        raise RecordError("tensor", f"of type {weights.dtype}, not of numbers")
    if weights.ndim != 4 or weights.shape[2:] != (len(layout.query_words), len(layout.key_words)):
        raise RecordError("tensor", f"shape {weights.shape} does not fit {len(layout.query_words)} x "
                                    f"{len(layout.key_words)} words")
    return weights.astype(np.float32)


def end_values_summary(values: dict[str, float]) -> summary_pb2.Summary:
    """Values measured once, at the end of a run (a run's head ablations), as scalars of this plugin's: the tab reads
    them beside the head scores, and TensorBoard's Scalars and Time Series, which list the scalars of the
    ``scalars`` plugin alone, show no one-point chart of each."""
    metadata = summary_pb2.SummaryMetadata(
        summary_description="measured once, at the end of the run",
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME),
        data_class=summary_pb2.DATA_CLASS_SCALAR)
    return summary_pb2.Summary(value=[
        summary_pb2.Summary.Value(tag=tag, metadata=metadata,
                                  tensor=tensor_util.make_tensor_proto(np.float32(value)))
        for tag, value in values.items()])
