"""A real TensorBoard server over a finished run serves its scalars, attention images and hparams:
started as `python -m tensorboard.main --logdir <run dir>` on 127.0.0.1, read through its HTTP data API."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SOLVED_RUN_MAX_STEPS, script_env

STARTUP_TIMEOUT_S = 120  # imports and the first scan of the logdir, on a busy machine
PNG = b"\x89PNG\r\n\x1a\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TensorBoard:
    def __init__(self, base_url: str, proc: subprocess.Popen) -> None:
        self.base_url, self.proc = base_url, proc

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


@pytest.fixture(scope="module")
def tensorboard(solved_run: Path, tmp_path_factory) -> Iterator[TensorBoard]:
    log = (tmp_path_factory.mktemp("tensorboard") / "server.log").open("w+")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(solved_run), "--host", "127.0.0.1",
         "--port", str(port), "--reload_interval", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=script_env(),
    )
    server = TensorBoard(f"http://127.0.0.1:{port}", proc)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:  # up, and the run's data loaded (the first scan of the logdir may lag the HTTP server)
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"tensorboard exited {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                if server.get_json("/data/plugin/scalars/tags"):
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


# The one run under the logdir: the run dir's tensorboard/ folder, named by the run's overrides (conftest's
# solved_run sets max_steps; the other overrides it gives only change what is logged, so they are not in the name).
RUN = f"tensorboard/max_steps={SOLVED_RUN_MAX_STEPS}"


def run_of(tags_by_run: dict) -> dict:
    assert list(tags_by_run) == [RUN], list(tags_by_run)
    return tags_by_run[RUN]


def test_server_serves_the_scalars(tensorboard: TensorBoard):
    tags = run_of(tensorboard.get_json("/data/plugin/scalars/tags"))
    expected = {"train/loss", "train/token_acc", "train/seq_acc", "val/loss", "val/token_acc", "val/seq_acc",
                "lr-AdamW", "attention_entropy/layer0/head0", "attention_entropy/layer1/head3"}
    assert expected <= set(tags)
    points = tensorboard.get_json("/data/plugin/scalars/scalars", run=RUN, tag="val/seq_acc")
    assert points and points[-1][2] >= 0.99  # [wall_time, step, value]


def test_server_serves_the_attention_images(tensorboard: TensorBoard):
    tags = run_of(tensorboard.get_json("/data/plugin/images/tags"))
    assert {f"attention/layer{layer}/head{head}" for layer in range(2) for head in range(4)} <= set(tags)
    images = tensorboard.get_json("/data/plugin/images/images", run=RUN, tag="attention/layer1/head0")
    assert len(images) >= 2  # every log_attention_every_n_steps, and at the end
    assert tensorboard.get("/data/plugin/images/individualImage?" + images[-1]["query"]).startswith(PNG)


def test_server_serves_the_hparams(tensorboard: TensorBoard):
    experiment = tensorboard.post_json("/data/plugin/hparams/experiment", {"experimentName": ""})
    hparams = {info["name"] for info in experiment["hparamInfos"]}
    assert {"model", "heads", "d_model", "layers", "mask", "task", "lr"} <= hparams
    metrics = {info["name"]["tag"] for info in experiment["metricInfos"]}
    assert {"hp/val_seq_acc", "hp/val_token_acc", "hp/val_loss"} <= metrics
