"""A real TensorBoard server for tests: ``python -m tensorboard.main --logdir <dir>`` on 127.0.0.1, read through
its HTTP API; it never outlives the test that started it. TensorBoard picks its own free port (``--port 0``) and
names it in its info file (``tensorboard.manager``, what ``%tensorboard`` in a notebook reads): a port chosen here and
handed over could be taken by another process in between."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from conftest import script_env

STARTUP_TIMEOUT_S = 120  # imports and the first scan of the logdir, on a busy machine


def served_port(pid: int) -> int | None:
    """The port of the TensorBoard process ``pid``, once it serves (it writes its info file after binding)."""
    from tensorboard import manager

    return next((info.port for info in manager.get_all() if info.pid == pid), None)


class TensorBoard:
    def __init__(self, base_url: str, proc: subprocess.Popen, log_path: Path) -> None:
        self.base_url, self.proc, self.log_path = base_url, proc, log_path

    def get(self, path: str, **params: str) -> bytes:
        url = f"{self.base_url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read()

    def get_json(self, path: str, **params: str):
        return json.loads(self.get(path, **params))

    def post_json(self, path: str, body: dict):
        request = urllib.request.Request(f"{self.base_url}{path}", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())


@contextlib.contextmanager
def serve(logdir: Path, log_path: Path, ready: Callable[[TensorBoard], bool], *flags: str,
          launcher: Sequence[str] = (sys.executable, "-m", "tensorboard.main")) -> Iterator[TensorBoard]:
    """The server over ``logdir``, once ``ready(server)`` holds (the first scan of the logdir may lag the HTTP
    server); its output goes to ``log_path``. ``launcher``: the command that starts it (e.g. scripts/start_tensorboard.py)."""
    log = log_path.open("w+")
    proc = subprocess.Popen(
        [*launcher, "--logdir", str(logdir), "--host", "127.0.0.1",
         "--port", "0", "--reload_interval", "1", *flags],
        stdout=log, stderr=subprocess.STDOUT, env=script_env(),
    )
    server = None
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"tensorboard exited {proc.returncode}:\n{log.read()[-3000:]}")
            if server is None and (port := served_port(proc.pid)) is not None:
                server = TensorBoard(f"http://127.0.0.1:{port}", proc, log_path)
            try:
                if server is not None and ready(server):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"tensorboard not serving the run after {STARTUP_TIMEOUT_S}s:\n{log.read()[-3000:]}")
            time.sleep(0.5)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
