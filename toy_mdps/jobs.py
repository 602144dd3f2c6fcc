"""Worker processes for the toy track's grids (`--jobs N`): sweep cells and experiment points.

Each worker is a fresh process ("spawn": no thread pool or generator state inherited from the
parent) that runs with one torch thread, so `N` jobs use `N` cores without oversubscribing them,
and the records equal those of a serial run with one thread (tested).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def check_jobs(jobs: int) -> None:
    """Refuse a job count below 1 (callers check before they write anything)."""
    if jobs < 1:
        raise ValueError(
            f"jobs={jobs} (--jobs): must be >= 1 (1 runs everything in this process, N > 1 in N "
            "worker processes)"
        )


def worker_pool(jobs: int, initializer: Callable[..., None], *initargs: Any) -> ProcessPoolExecutor:
    """A pool of `jobs` fresh worker processes, each set up by `initializer(*initargs)`.

    A worker that cannot start makes the pool raise `BrokenProcessPool` (no silent hang).
    """
    check_jobs(jobs)
    return ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=initializer,
        initargs=initargs,
    )


def machine_jobs(limit: int = 2) -> int:
    """The number of jobs `gmc-grpo reproduce` uses: the machine's cores, at most `limit` (the
    quick grids have few points; two keep a 2-core machine busy without oversubscribing it)."""
    import os

    return max(1, min(limit, os.cpu_count() or 1))


def single_thread() -> None:
    """Worker set-up: one torch thread (the caller's processes provide the parallelism)."""
    import torch

    torch.set_num_threads(1)


__all__ = ["check_jobs", "machine_jobs", "single_thread", "worker_pool"]
