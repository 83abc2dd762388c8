"""The attention tab of TensorBoard: every layer and head of the probe sentence at every logged step, head
scores and ablation drops beside them, and any sentence run through the run's checkpoint.

Its records are written by the callbacks and named in :mod:`attention_lab.records`; ``snapshot`` renders the same
page offline, from the same routes.

TensorBoard imports the plugin at start-up; nothing here imports torch until a sentence is asked for.
"""

from attention_lab.records.run_names import PLUGIN_NAME

__all__ = ["PLUGIN_NAME"]
