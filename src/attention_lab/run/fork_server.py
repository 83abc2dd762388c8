"""The parallel launcher's fork server, made ready once for every job it forks (``hydra/launcher=parallel``).

The launcher imports this module in the fork server after its ``preload`` modules (torch, Lightning, the lab), so a
job starts from a process that has done, once, two things each job did anew, about 1 s of a job on the lab's 2-core
machine (docs/benchmarks.md, "Sweep jobs"):

- **Hydra's plugin registry.** A job restores the sweep's Hydra state (``Singleton.set_state``, as Hydra's own
  launchers do), and Hydra then rebuilds its ``Plugins`` registry: it walks and imports every module of
  ``hydra_plugins``. Built here, each job inherits it and hands it back to ``set_state``, which keeps it (the
  launcher's ``with_plugins``). Same modules, same ``sys.path``: the same plugins as a scan in the job.
- **Python's garbage collector.** What the imports created lives as long as the process; ``gc.freeze`` leaves it out
  of every later collection, as :mod:`attention_lab.startup_gc` does for a single run once its training starts.
  Without it, each full collection in a job traverses the 400,000 objects of torch and Lightning again (about
  0.2 s each: Hydra's compose of the job's config alone triggered two). It also spares the forked jobs the writes
  of a collection into the pages they share with the fork server (``gc.freeze``'s documented use before a fork).

Not inside ``hydra_plugins``: Hydra's scan imports every module there, and this one would start the scan again
while it runs."""

import gc

from hydra.core.plugins import Plugins

Plugins.instance()
gc.freeze()  # last: everything imported before, this module's registry included
