"""The benchmark harness behind ``scripts/benchmark.py`` (not part of the attention_lab package).

A. attention kernels (kernels, twins, memory): our variants against PyTorch's own implementations and
   hand-written SDPA twins, with ``torch.utils.benchmark``;
B. training throughput (training, plain_loop, lightning_floor, throughput): ``scripts/train.py`` against a plain
   PyTorch loop, and Lightning's own loop alone between them;
C. attention-map logging overhead (logging_overhead, timer, hook_profiler): maps on and off;
D. start-up and time to result (startup); a sweep job's time beyond its training (sweep_overhead);
E. what replaces attention (scaling, mixer_twins): multihead, linear and conv against the sequence length, and
   linear, sigmoid and conv against hand-written twins.

The compared cases take turns in rounds whose order rotates, so that the noise of a shared machine hits
all of them alike; every ratio divides numbers of the same run. See docs/benchmarks.md.
"""
