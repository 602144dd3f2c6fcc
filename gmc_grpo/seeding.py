"""One seeding mechanism: every random stream spawned from `numpy.random.SeedSequence`.

A stream is one source of randomness with one purpose (the samples of one toy learner seed, the
prompt order of one epoch, the noise of one grid cell, ...). Its state comes from
`SeedSequence(entropy=root, spawn_key=(STREAMS[name], *path))`: `root` is the seed the user set
(a run seed, an MDP seed, ...), `name` says what the stream is for, `path` places it within the
run (a learner seed, a step, a cell, an epoch). numpy mixes entropy and spawn key by a hash, so
streams that differ in any part are independent (their states differ), whatever the integers:
there is no arithmetic between seeds that could make two streams meet, as `seed * stride +
offset` did (the bound statistics of toy run seed `r` at step `k` drew the learner stream of
run seed `r + k + 1`). Torch generators are seeded with 63 bits drawn from the stream's
`SeedSequence` (`stream_seed`, `torch_generator`); numpy generators take it directly
(`numpy_generator`).

The table of spawn keys (the first element of every key; never reuse or renumber one, it would
change every record made with it):

| stream              | key | root         | path                       | draws                         |
|---------------------|-----|--------------|----------------------------|-------------------------------|
| `toy_mdp`           | 1   | `mdp_seed`   | ()                         | each prompt's target pattern  |
| `toy_init`          | 2   | `init_seed`  | ()                         | `theta_0` of the toy learner  |
| `toy_learner`       | 3   | `run_seed`   | (learner seed,)            | prompts and responses         |
| `toy_schedule`      | 4   | `run_seed`   | (learner seed,)            | worker generation times       |
| `toy_statistics`    | 5   | `run_seed`   | (learner seed, step)       | bound statistics' minibatches |
| `sweep_theta0`      | 6   | `init_seed`  | (replicate,)               | a replicate's `theta_0`       |
| `sweep_direction`   | 7   | `init_seed`  | (replicate,)               | direct mode's perturbation    |
| `sweep_trajectory`  | 8   | `init_seed`  | (replicate,)               | reference trajectory noise    |
| `sweep_cell`        | 9   | `run_seed`   | (replicate, staleness, G)  | one grid cell's minibatches   |
| `llm_model_init`    | 20  | model `seed` | ()                         | the tiny model's weights      |
| `llm_problems`      | 21  | task `seed`  | ()                         | the arithmetic problems       |
| `llm_warmup`        | 22  | `seed`       | ()                         | the warm-up's batches         |
| `llm_data_order`    | 23  | `seed`       | (epoch,)                   | the prompt stream's order     |
| `llm_sampling`      | 24  | `seed`       | ()                         | rollout samples (base seed)   |
| `llm_evaluation`    | 25  | `seed`       | (eval set,)                | evaluation samples (base)     |
| `llm_schedule`      | 26  | `seed`       | ()                         | worker generation times       |
| `llm_engine`        | 27  | `seed`       | ()                         | the engine's own seed         |
| `llm_bounds`        | 28  | `seed`       | (step,)                    | bound tracker's KL samples    |

A *base* seed (`llm_sampling`, `llm_evaluation`) is 62 bits: the engines add the sample's
position to it (`llm_runs.engines.base.sample_seed`: stream position `k`'s sample `j` is
`base + k G + j`, whatever the batching), and the headroom keeps the sum a valid seed. The
engine's own seed (`llm_engine`) is drawn with 32 bits: vLLM seeds numpy's legacy generator with
it, which refuses anything from `2**32` on.

Records and checkpoints carry `SEEDING` (`config.json`'s `seeding`, the checkpoints' state): a
run, sweep or suite written before this mechanism (hand-mixed seeds) is refused on resume with a
message saying so (`check_seeding`), since its generators and the streams still to come differ.
"""

from __future__ import annotations

from numbers import Integral
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

#: the seeding scheme records and checkpoints were written with (`check_seeding`)
SEEDING = "numpy-seed-sequence-1"

#: stream name -> the first element of its spawn key (module docstring; never renumber)
STREAMS: dict[str, int] = {
    "toy_mdp": 1,
    "toy_init": 2,
    "toy_learner": 3,
    "toy_schedule": 4,
    "toy_statistics": 5,
    "sweep_theta0": 6,
    "sweep_direction": 7,
    "sweep_trajectory": 8,
    "sweep_cell": 9,
    "llm_model_init": 20,
    "llm_problems": 21,
    "llm_warmup": 22,
    "llm_data_order": 23,
    "llm_sampling": 24,
    "llm_evaluation": 25,
    "llm_schedule": 26,
    "llm_engine": 27,
    "llm_bounds": 28,
}

#: bits of a generator seed (`torch.Generator.manual_seed` takes up to 64; 63 keep it a signed
#: int64 too) and of a base seed that an engine offsets by a sample's position
SEED_BITS = 63
BASE_SEED_BITS = 62


def _check_part(value: Any, what: str, stream: str) -> int:
    if not isinstance(value, Integral) or isinstance(value, bool) or value < 0:
        raise ValueError(
            f"the {what} of random stream {stream!r} must be an integer >= 0, got {value!r}; "
            "seeds are non-negative integers (e.g. --seed 0)"
        )
    return int(value)


def seed_sequence(root: int, stream: str, *path: int) -> np.random.SeedSequence:
    """The `SeedSequence` of stream `stream` at `path` under the seed `root` (module docstring)."""
    if stream not in STREAMS:
        raise ValueError(f"unknown random stream {stream!r}; streams: {', '.join(STREAMS)}")
    entropy = _check_part(root, "root seed", stream)
    key = tuple(_check_part(part, "path", stream) for part in path)
    return np.random.SeedSequence(entropy, spawn_key=(STREAMS[stream], *key))


def stream_seed(root: int, stream: str, *path: int, bits: int = SEED_BITS) -> int:
    """An integer seed in `[0, 2**bits)` drawn from the stream's `SeedSequence`."""
    state = seed_sequence(root, stream, *path).generate_state(2, np.uint32)
    return ((int(state[1]) << 32) | int(state[0])) >> (64 - bits)


def base_seed(root: int, stream: str, *path: int) -> int:
    """A `BASE_SEED_BITS`-bit seed an engine offsets by a sample's position (module docstring)."""
    return stream_seed(root, stream, *path, bits=BASE_SEED_BITS)


def torch_generator(root: int, stream: str, *path: int) -> torch.Generator:
    """A CPU `torch.Generator` seeded from the stream (`stream_seed`)."""
    import torch

    return torch.Generator().manual_seed(stream_seed(root, stream, *path))


def numpy_generator(root: int, stream: str, *path: int) -> np.random.Generator:
    """A numpy `Generator` (PCG64) on the stream's `SeedSequence` itself."""
    return np.random.default_rng(seed_sequence(root, stream, *path))


def check_seeding(found: Any, where: str, *, what: str = "run") -> None:
    """Refuse to continue a `what` in `where` whose records or checkpoint were written with
    another seeding scheme (`found`: the `seeding` value it holds, None before this one)."""
    if found == SEEDING:
        return
    before = (
        "before gmc-grpo drew its random streams from numpy SeedSequence spawn keys "
        "(gmc_grpo.seeding; earlier versions mixed seeds by hand)"
        if found is None
        else f"with the seeding scheme {found!r}, not this version's {SEEDING!r}"
    )
    raise ValueError(
        f"{where} holds a {what} written {before}: its generators and the random streams still "
        "to come differ, so it cannot be continued or reused exactly; rerun it from the start "
        "(toy: --fresh; llm: a new --out, or delete the folder) or choose another --out"
    )
