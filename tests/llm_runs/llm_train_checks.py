"""Helpers shared by the trainer tests (imported as `llm_train_checks`; pytest does not collect it).

`one_thread` is an autouse fixture for the modules that import it: the tiny matrices gain nothing
from two threads, and one thread per test keeps the shared cores free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from llm_runs.config import LLMTrainConfig

# what every CPU test run of the trainer shares
CPU_RUN = dict(optimizer="adamw", engine="hf", learner_device="cpu", progress=False)


def cpu_config(out, **values: Any) -> LLMTrainConfig:
    """A `LLMTrainConfig` for a seconds-long CPU run writing to `out`."""
    return LLMTrainConfig(out=str(out), **{**CPU_RUN, **values})


# a 1-layer tiny Qwen3 (random init)
TINY = {"seed": 0, "num_layers": 1, "hidden_size": 64, "intermediate_size": 128}


def tiny_config(out, **overrides: Any) -> LLMTrainConfig:
    """A seconds-long run: 4 prompts x 4 responses of <= 6 tokens on additions, no warm-up."""
    values: dict[str, Any] = dict(
        tiny_model=TINY,
        task="arithmetic",
        reward="exact",
        arithmetic={"max_operand": 9, "num_train": 40, "num_eval": 8},
        num_groups=4,
        group_size=4,
        groups_per_micro=2,
        total_steps=4,
        lr=1e-3,
        max_prompt_tokens=32,
        max_completion_tokens=6,
    )
    values.update(overrides)
    return cpu_config(out, **values)


def quiet(_text: str) -> None:
    """A `notice` callback that prints nothing."""
    return None


def even_first_char(texts, references):
    """A learnable reward with signal from the first update on a random-init model."""
    return [float(bool(t) and ord(t[0]) % 2 == 0) for t in texts]


def strip(rows):
    """Rows without wall-clock fields (the only ones allowed to differ)."""
    return [
        {k: v for k, v in r.items() if not k.startswith("perf/") and k != "time_s"} for r in rows
    ]


#: fields fixed by the sampled tokens alone (equal when the same tokens were drawn)
TOKEN_FIELDS = ("step", "reward/", "response/", "staleness/")


def assert_same_rollouts(got, want, rel=1e-4, abs=1e-5):
    """Two runs' rows drew the same tokens: token-fixed fields equal, the log-prob-derived ones
    equal up to float32 rounding. The HF engine samples a call's prompts as one batch, whose
    matrix products MKL rounds differently from one-prompt ones (docs/llm-cpu.md, "Records"),
    so the recorded log-probs of the same tokens differ in their last bits."""
    import pytest

    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    for a, b in zip(got, want, strict=True):
        for key, value in a.items():
            if key.startswith(TOKEN_FIELDS):
                assert value == b[key], (a["step"], key)
            else:
                assert value == pytest.approx(b[key], rel=rel, abs=abs), (a["step"], key)


def engine_processes(parent: int | None = None) -> list[int]:
    """Pids of running engine processes (of the trainer `parent`, or of any)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"llm_runs.engines.remote" in argv and state != "Z":
            if parent is None or str(parent).encode() in argv:
                found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """`pid` is a running (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
