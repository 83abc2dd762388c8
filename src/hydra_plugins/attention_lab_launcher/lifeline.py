"""A job's process ends with its sweep. When the launcher's main process is gone without stopping its jobs
(SIGKILL, the out-of-memory killer), each job stops as on SIGTERM: at the end of its step, with a checkpoint,
recorded as interrupted, so that ``resume=<sweep dir>`` continues it. Without this the jobs trained on as
orphans, and so did the fork server: multiprocessing ends it once neither the launcher nor any process forked
from it is left (each holds the fork server's "alive" pipe), so it exits after the last job.

The launcher holds the write end of one pipe per job and never writes to it; the job watches the read end from
a thread, and end of file means that its only holder, the launcher, has exited. A pipe rather than Linux's
parent-death signal: a job's parent is the fork server, not the launcher, and a pipe works on every platform.
"""

# No `from __future__ import annotations`: Hydra imports the modules of hydra_plugins outside sys.modules.
import os
import signal
import sys
import threading
from multiprocessing.connection import Connection


def stop_when_gone(lifeline: Connection, launcher_pid: int) -> None:
    try:
        lifeline.poll(None)  # returns at end of file: the launcher never writes
    except OSError:  # the pipe broke: the launcher is gone just the same
        pass
    sys.stderr.write(f"warning: the sweep's main process (pid {launcher_pid}) is gone: this job stops as on "
                     "SIGTERM\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGTERM)  # the run's own handler (or, before it is set, the default) takes it


def watch_launcher(lifeline: Connection, launcher_pid: int) -> threading.Thread:
    """In the job's process: a daemon thread that sends SIGTERM to the process once the launcher is gone."""
    thread = threading.Thread(target=stop_when_gone, args=(lifeline, launcher_pid), name="launcher-lifeline",
                              daemon=True)
    thread.start()
    return thread
