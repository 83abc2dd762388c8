"""The attention tab of TensorBoard: every layer and head of the probe sentence at every logged step, head
scores and ablation drops beside them, and any sentence run through the run's checkpoint.

- :mod:`~attention_lab.tensorboard_plugin.summary`: the tensor summary a training run writes, and how it is read.
- :mod:`~attention_lab.tensorboard_plugin.scores`: head-score and ablation scalars as layers x heads grids.
- :mod:`~attention_lab.tensorboard_plugin.limits`: how large a record the tab shows, and its numbers as JSON.
- :mod:`~attention_lab.tensorboard_plugin.declared`: the sizes a run's event files declare, checked before they
  are read.
- :mod:`~attention_lab.tensorboard_plugin.run_config`: what the tab takes from a run's config: the layers, heads
  and indices whose tags it reads, and the task's head-score kind.
- :mod:`~attention_lab.tensorboard_plugin.run_data`: a run's maps and scores through TensorBoard's data provider.
- :mod:`~attention_lab.tensorboard_plugin.sentence`: a run's checkpoint on a new sentence.
- :mod:`~attention_lab.tensorboard_plugin.circuit_views`: the logged composition, copying, patching and
  loss-by-index scalars as grids and a step x index heatmap.
- :mod:`~attention_lab.tensorboard_plugin.checkpoint_circuits`: a head's QK and OV word tables, direct logit
  attribution of a sentence and patching of a typed pair, from the run's checkpoint.
- :mod:`~attention_lab.tensorboard_plugin.plugin`: the ``TBPlugin`` and its routes (``static/``: the page).

TensorBoard imports the plugin at start-up; nothing here imports torch until a sentence is asked for.
"""

# The plugin's name: its records' plugin_name, its routes' prefix and the tab's URL fragment. Here, not in
# summary.py, so that naming the tab (a run's `next:` line) imports no TensorBoard.
PLUGIN_NAME = "attention_lab"
