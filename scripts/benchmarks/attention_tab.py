"""What the attention tab costs, on one trained run: the bytes of its records in the event files (beside the
PNG maps), the training-thread time of one record, and the latency of its "any sentence" request on a real
TensorBoard server.

    python scripts/benchmarks/attention_tab.py <run dir>
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path

from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

from attention_lab.records.probe_summary import PROBE_TAG, WordLayout, probe_summary

TFRECORD_FRAMING = 16  # length (8), its CRC (4) and the data's CRC (4) around each event
SENTENCES = 30
TYPING_S = 10  # a user's time to type a sentence after opening the tab


def event_bytes(run_dir: Path) -> dict[str, tuple[int, set[int]]]:
    """Bytes and steps of the run's events: the tab's tensors, the PNG attention maps, everything else."""
    found: dict[str, list] = defaultdict(lambda: [0, set()])
    for path in run_dir.glob("tensorboard/**/events.out.tfevents.*"):
        for event in EventFileLoader(str(path)).Load():
            tags = [value.tag for value in event.summary.value]
            kind = ("tab tensors" if PROBE_TAG in tags else
                    "PNG maps attention/*" if any(t.startswith("attention/layer") for t in tags) else "other")
            found[kind][0] += len(event.SerializeToString()) + TFRECORD_FRAMING
            found[kind][1].add(event.step)
    return {kind: (size, steps) for kind, (size, steps) in found.items()}


def record_seconds(module, words: list[str], repeats: int = 200) -> float:
    """Median time of one record as the callback makes it: the weights, the proto, the write."""
    import numpy as np
    from torch.utils.tensorboard import SummaryWriter

    layout = WordLayout(words, words)
    times = []
    with tempfile.TemporaryDirectory() as folder:
        writer = SummaryWriter(folder)
        for step in range(repeats):
            start = time.perf_counter()
            _, weights = module.predict_words([words])
            stacked = np.stack([w[0].float().numpy() for w in weights])
            writer.file_writer.add_summary(probe_summary(stacked, layout), step)
            times.append(time.perf_counter() - start)
        writer.close()
    return statistics.median(times)


def sentence_latency(run_dir: Path, words: list[str], typing_s: float) -> tuple[float, list[float]]:
    """(first request, later requests) in seconds, on ``tensorboard --logdir <run dir>`` started here; the
    first is sent ``typing_s`` after the page's first request (the runs), as a user types a sentence."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}/data/plugin/attention_lab"
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(run_dir), "--host",
                               "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def get(route: str, **params: str) -> bytes:
        with urllib.request.urlopen(f"{base}/{route}?{urllib.parse.urlencode(params)}", timeout=120) as response:
            return response.read()

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if b'"has_maps": true' in get("runs"):
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("TensorBoard did not serve the run")
            time.sleep(0.2)
        run = json.loads(get("runs"))["runs"][0]["run"]
        time.sleep(typing_s)
        times = []
        for n in range(SENTENCES + 1):
            text = " ".join(words[(n + i) % len(words)] for i in range(len(words)))  # a new sentence each time
            start = time.perf_counter()
            get("sentence", run=run, text=text)
            times.append(time.perf_counter() - start)
        return times[0], times[1:]
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    import torch

    from attention_lab.data.corpus import tokenize
    from attention_lab.records.trained_run import find_run, load_module
    from attention_lab.review.visualize import run_probe

    torch.set_num_threads(1)  # as a training run (the threads knob) and the tab's sentence model
    run_dir = Path(sys.argv[1])
    for kind, (size, steps) in sorted(event_bytes(run_dir).items()):
        print(f"{kind:22s} {size:>10,d} bytes, {len(steps)} steps: {size / max(len(steps), 1):,.0f} bytes per step")
    files = find_run(run_dir)
    module, _ = load_module(files)
    words = tokenize(run_probe(files.config or {}))  # the probe the run logged: its own, else its task's
    print(f"one record on the training thread: {record_seconds(module, words) * 1000:.2f} ms (median of 200)")
    for typing_s in (0, TYPING_S):
        first, later = sentence_latency(run_dir, words, typing_s)
        print(f"sentence request {typing_s} s after the page opened: first {first * 1000:.0f} ms (torch imported, "
              f"checkpoint loaded); later {statistics.median(later) * 1000:.1f} ms (median of {len(later)}, "
              f"max {max(later) * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
