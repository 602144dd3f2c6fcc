"""The estimators' bias on a language model, measured: `gmc-grpo llm bias`.

On the toy MDPs the gradient is exact and each estimator's squared bias is measured against it
(`toy_mdps.statistics`). Here the same question is asked of a language model: at a checkpoint
`theta_n` of a delayed run, with that checkpoint's stale behavior policy `mu = theta_{n - lag}`,
how far is the mean of each estimator from the on-policy gradient `grad J(theta_n) / T`?

**The draws.** A *block* is `m` independent groups: `m` prompts drawn uniformly with
replacement from the run's training pool (the run's prompt distribution `D`), `G` responses
each sampled from `mu` (the HF engine, the run's temperature 1 and top-p 1). Every method's
estimate of the block is computed on the *same* samples (§3's weighted class and GRPO):

    g_block = 1/(T m G) sum_{b, i, t} psi_{b,i,t} grad_theta log pi_theta(y_{b,i,t} | ...),

with `psi` from `gmc_grpo.losses.gradient_weights` (the definition the training losses are
tested against) for the method's registered loss (`gmc_grpo.methods`: any method, a user's
own included; hooks that are not part of the estimator -- VCPO's baseline and step size, GAC's
projection -- are not applied, so `vcpo` here is its sequence-level truncation `min(rho, c)`).
`log pi_theta` and `log mu` are the learner's own log-probs of the sampled tokens (one packed
forward pass each, `llm_runs.batch.micro_logprobs`), so the ratio is exactly 1 when
`mu = theta`. One backward pass per method gives its block estimate, a vector over all the
model's parameters. The advantage is the leave-one-out one for every method by default
(`advantage="loo"`, as the toy sweep: the methods then differ only in their weighting, and
the IS estimator is unbiased, `E g^IS = grad J / T`; GRPO's own centered advantage would scale
it by `(G - 1) / G` whatever the delay, `toy_mdps.statistics`).

**The target.** `grad J(theta_n) / T` is itself estimated: `target_blocks` blocks of on-policy
groups (sampled from `theta_n`, the IS estimator with ratio 1 and LOO advantages: unbiased).

**Squared bias.** With `K` method blocks `x_k` and `K0` target blocks `y_j` (independent, so
the block means are i.i.d. within each sample),

    U = sum_{k != k'} <x_k, x_k'> / (K (K-1)) - 2 <x_bar, y_bar> + sum_{j != j'} <y_j, y_j'> / (K0 (K0-1))

is unbiased for `||E g - grad J / T||^2` (the two-sample form of the toy's U-statistic; the
Monte Carlo noise of both means is removed, not just shrunk). Its interval is normal with the
two-sample delete-one jackknife variance (one block of either sample left out at a time), all
from the Gram matrix of the block vectors (`gmc_grpo.stats.gram_statistics`). `GMC - TIC` is
the same statistic of the difference, paired (the two share every sample, so the jackknife
leaves out the same block of both). The relative squared bias divides by the unbiased estimate of
`||grad J / T||^2` (`sum_{j != j'} <y_j, y_j'> / (K0 (K0 - 1))`), its interval by the same
jackknife. Removed mass, capped fraction and the KL between the current and the behavior policy
(`E_theta[log pi_theta(y) / mu(y)]` over the target's on-policy samples: the low-variance
estimator) get normal intervals over blocks.

**What is checked** (the toy sweep's findings, `toy_mdps.sweep.analysis`): IS unbiased (0 inside
its interval); GMC's squared bias below TIC's at a stale checkpoint (the paired interval below
0); GMC's bias shrinking from the smallest to the largest `G` while TIC's does not
(`smallest G - largest G`, independent samples: the variances add).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gmc_grpo import advantages as advantage_lib
from gmc_grpo.losses import gradient_weights, minibatch_diagnostics
from gmc_grpo.methods import MethodSettings, get_method
from gmc_grpo.stats import (
    gram_matrix,
    gram_statistics,
    independent_difference,
    interval_sign,
    mean_interval,
)
from llm_runs.run_policies import checkpoint_steps, policy_dir, run_config

#: The estimators of item 5 (IS, TIC, GMC, GRPO, VCPO's truncation).
DEFAULT_METHODS: tuple[str, ...] = ("is", "tic", "gmc", "grpo", "vcpo")


@dataclass
class BiasSettings:
    """How many draws, of what, for one `measure_bias` call."""

    methods: tuple[str, ...] = DEFAULT_METHODS
    """registered methods whose estimators are measured (`gmc_grpo.methods`)"""
    group_sizes: tuple[int, ...] = (4, 8, 16)
    """group sizes `G` at which every method is measured (GMC's bias should shrink with `G`)"""
    trajectories_per_block: int = 128
    """trajectories per block (`m = trajectories_per_block / G` groups); blocks are the
    jackknife's units"""
    blocks: int = 24
    """method blocks per (checkpoint, `G`), all methods on the same samples"""
    target_blocks: int = 48
    """on-policy blocks of the target `grad J / T` per checkpoint"""
    target_group_size: int = 8
    """`G` of the on-policy target sample (any `G` is unbiased with LOO advantages)"""
    advantage: str = "loo"
    """"loo" for every method (default; IS is then unbiased), "centered", "std", or "paper"
    (each method's own kind; a baseline hook is not applied)"""
    seed: int = 0
    """root of the `numpy.random.SeedSequence` whose spawned children seed every block"""
    level: float = 0.95
    """confidence level of every interval"""
    logit_chunk: int = 4096
    """positions per log-softmax chunk of the learner's forward pass"""

    def __post_init__(self) -> None:
        self.methods = tuple(self.methods)
        self.group_sizes = tuple(int(g) for g in self.group_sizes)
        for name in self.methods:
            get_method(name)  # raises naming the registered ones
        if not self.methods:
            raise ValueError("BiasSettings.methods: give at least one method, e.g. gmc,tic")
        if not self.group_sizes or min(self.group_sizes) < 2:
            raise ValueError("BiasSettings.group_sizes: give group sizes >= 2, e.g. 4,8,16")
        for g in (*self.group_sizes, self.target_group_size):
            if self.trajectories_per_block % g:
                raise ValueError(
                    f"BiasSettings.trajectories_per_block={self.trajectories_per_block} must be a "
                    f"multiple of every group size (G={g})"
                )
        if self.blocks < 3 or self.target_blocks < 3:
            raise ValueError("BiasSettings.blocks and target_blocks must be >= 3 (the jackknife)")
        if self.advantage not in ("loo", "centered", "std", "paper"):
            raise ValueError(
                f"BiasSettings.advantage={self.advantage!r}: one of loo, centered, std, paper"
            )
        if not 0 < self.level < 1:
            raise ValueError(f"BiasSettings.level={self.level}: must be in (0, 1)")


# ----------------------------------------------------------------------------------------------
# Drawing blocks and computing every method's estimate on them
# ----------------------------------------------------------------------------------------------


@dataclass
class Estimator:
    """One method's estimator: its loss config and advantage kind."""

    name: str
    loss: Any
    advantage: str
    version_lag: bool


def estimators_of(
    settings: BiasSettings, method_settings: MethodSettings, max_length: int
) -> list[Estimator]:
    out = []
    for name in settings.methods:
        spec = get_method(name)
        kind = spec.advantage if settings.advantage == "paper" else settings.advantage
        out.append(
            Estimator(
                name,
                spec.loss_config(method_settings, max_length=max_length),
                kind,
                spec.needs_version_lag,
            )
        )
    return out


@dataclass
class BlockResult:
    """The flattened block estimate `[P]` (float32) of each method, and per-block diagnostics."""

    gradients: dict[str, Tensor]
    diagnostics: dict[str, dict[str, float]] = field(default_factory=dict)
    log_ratio_mean: float = 0.0


def block_estimates(
    model: torch.nn.Module,
    behavior: torch.nn.Module | None,
    batch: Any,
    estimators: Sequence[Estimator],
    *,
    lag: int,
    chunk: int,
) -> BlockResult:
    """Every estimator's estimate on one block `batch` (`TrajectoryBatch` of `m` groups of `G`).

    behavior: the behavior model (None: the current model is the behavior policy, ratio 1).
    """
    from llm_runs.batch import micro_logprobs

    params = [p for p in model.parameters() if p.requires_grad]
    lp, _ = micro_logprobs(model, batch, chunk)  # [m, G, T], with gradient
    mask = batch.response_mask().to(lp.device)
    if behavior is None:
        lb = lp.detach()
    else:
        with torch.no_grad():
            lb, _ = micro_logprobs(behavior, batch, chunk)
    current = lp.detach()
    rewards = batch.rewards.to(lp.device)
    log_ratio = ((current - lb) * mask).sum(-1).double()  # [m, G]
    result = BlockResult({}, {}, float(log_ratio.mean()))
    lag_tensor = torch.full(rewards.shape, float(lag), device=lp.device)
    for k, est in enumerate(estimators):
        adv = advantage_lib.compute(rewards, est.advantage)  # type: ignore[arg-type]
        psi = gradient_weights(
            est.loss, current, lb, adv, mask, version_lag=lag_tensor if est.version_lag else None
        )
        surrogate = (psi.detach().to(lp.dtype) * lp * mask).sum()
        grads = torch.autograd.grad(
            surrogate, params, retain_graph=k < len(estimators) - 1, allow_unused=True
        )
        result.gradients[est.name] = torch.cat(
            [
                (g if g is not None else torch.zeros_like(p)).reshape(-1).float().cpu()
                for g, p in zip(grads, params, strict=True)
            ]
        )
        diag = minibatch_diagnostics(
            est.loss, log_ratio[None], psi[None].double(), adv[None], mask[None]
        )
        result.diagnostics[est.name] = {key: float(v[0]) for key, v in diag.items()}
    return result


def _block_seeds(seed: int, path: Sequence[int], count: int) -> list[int]:
    """`count` 63-bit seeds from the `SeedSequence(seed, spawn_key=path)` children."""
    root = np.random.SeedSequence(seed, spawn_key=tuple(path))
    return [int(child.generate_state(1, dtype=np.uint64)[0] >> 1) for child in root.spawn(count)]


def draw_block(producer: Any, problems: Sequence[Any], groups: int, seed: int) -> Any:
    """`groups` groups of `producer.settings.group_size` responses from the producer's engine,
    prompts uniform with replacement from `problems` (a generator seeded `seed`): a scored
    `TrajectoryBatch` (`RolloutProducer.batch_of`; version 0, which nothing here reads)."""
    from llm_runs.engines.base import SamplingConfig

    config = producer.settings
    gen = torch.Generator().manual_seed(seed)
    indices = torch.randint(len(problems), (groups,), generator=gen).tolist()
    chosen = [problems[i] for i in indices]
    sampling = SamplingConfig(
        n=config.group_size,
        temperature=config.temperature,
        top_p=config.top_p,
        max_tokens=config.max_completion_tokens,
        stop=producer.task.stop,
        seed=int(torch.randint(1 << 30, (1,), generator=gen)),
    )
    prompts = [producer.task.prompt(p.problem) for p in chosen]
    return producer.batch_of(producer.engine.generate(prompts, sampling), chosen, indices, 0)


#: `producer(which, group_size)`: a `RolloutProducer` sampling from the "current" or the
#: "behavior" model's engine with groups of `group_size`
ProducerOf = Callable[[str, int], Any]


def _producers(
    current: torch.nn.Module,
    behavior: torch.nn.Module | None,
    tokenizer: Any,
    config: Any,
    problems: Sequence[Any],
    reward_fn: Any,
) -> ProducerOf:
    """The producers of `measure_bias`'s blocks: one HF engine per model (behavior None: the
    current model's engine samples both), the run's task and reward."""
    from llm_runs.engines.hf import HFEngine
    from llm_runs.rollouts import RolloutProducer, Task

    if config.temperature != 1.0 or config.top_p != 1.0:
        raise ValueError(
            "llm bias needs a run sampled at temperature 1 and top-p 1 (then the engine samples "
            f"from pi itself); this run has temperature={config.temperature}, top_p={config.top_p}"
        )
    task = Task(config.task, config.max_prompt_tokens, tokenizer)
    pad = tokenizer.pad_token_id
    engines = {"current": HFEngine.from_model(current, tokenizer)}
    engines["behavior"] = (
        engines["current"] if behavior is None else HFEngine.from_model(behavior, tokenizer)
    )

    def producer(which: str, group_size: int) -> RolloutProducer:
        return RolloutProducer(
            dataclasses.replace(config, group_size=group_size).rollout_settings(),
            engines[which],
            task,
            problems,
            pad_id=int(pad if pad is not None else 0),
            reward_fn=reward_fn,
        )

    return producer


def _target_blocks(
    current: torch.nn.Module,
    behavior: torch.nn.Module | None,
    producer: ProducerOf,
    problems: Sequence[Any],
    target: Estimator,
    settings: BiasSettings,
    *,
    lag: int,
    seed_path: Sequence[int],
    progress: Callable[[int], None] | None,
) -> tuple[list[Tensor], list[float]]:
    """The target's `K0` on-policy block vectors `[P]` (the current policy's groups, IS with
    ratio 1 and LOO advantages: unbiased for `grad J / T`) and, per block, the KL between the
    current and the behavior policy on its samples (0 when behavior is None)."""
    vectors: list[Tensor] = []
    kl_values: list[float] = []
    per_block = settings.trajectories_per_block
    for s in _block_seeds(settings.seed, (*seed_path, 0), settings.target_blocks):
        batch = draw_block(
            producer("current", settings.target_group_size),
            problems,
            per_block // settings.target_group_size,
            s,
        )
        block = block_estimates(current, None, batch, [target], lag=lag, chunk=settings.logit_chunk)
        vectors.append(block.gradients["target"])
        if behavior is not None:  # KL(pi || mu) = E_pi[log pi / mu], on the on-policy samples
            kl_values.append(_mean_log_ratio(current, behavior, batch, settings.logit_chunk))
        else:
            kl_values.append(0.0)
        if progress is not None:
            progress(1)
    return vectors, kl_values


def _group_size_statistics(
    current: torch.nn.Module,
    behavior: torch.nn.Module | None,
    producer: ProducerOf,
    problems: Sequence[Any],
    estimators: Sequence[Estimator],
    target_vectors: Sequence[Tensor],
    settings: BiasSettings,
    group_size: int,
    *,
    lag: int,
    seed_path: Sequence[int],
    progress: Callable[[int], None] | None,
) -> dict[str, Any]:
    """`gram_statistics` of every estimator's `K` blocks of groups of `group_size` (drawn from
    the behavior policy, all estimators on the same samples) against the target's blocks, with
    the per-block diagnostics' intervals and `groups_per_block`."""
    per_block = settings.trajectories_per_block
    vectors = list(target_vectors)  # the Gram matrix's first K0 rows: the target's blocks
    method_index: dict[str, list[int]] = {e.name: [] for e in estimators}
    diagnostics: dict[str, dict[str, list[float]]] = {e.name: {} for e in estimators}
    for s in _block_seeds(settings.seed, seed_path, settings.blocks):
        batch = draw_block(producer("behavior", group_size), problems, per_block // group_size, s)
        block = block_estimates(
            current, behavior, batch, estimators, lag=lag, chunk=settings.logit_chunk
        )
        for e in estimators:
            method_index[e.name].append(len(vectors))
            vectors.append(block.gradients[e.name])
            for key, value in block.diagnostics[e.name].items():
                diagnostics[e.name].setdefault(key, []).append(value)
        if progress is not None:
            progress(1)
    stats = gram_statistics(
        gram_matrix(vectors), method_index, list(range(len(target_vectors))), settings.level
    )
    for name, values in diagnostics.items():
        stats["methods"][name].update(
            {key: mean_interval(v, settings.level) for key, v in values.items()}
        )
    stats["groups_per_block"] = per_block // group_size
    return stats


def measure_bias(
    current: torch.nn.Module,
    behavior: torch.nn.Module | None,
    tokenizer: Any,
    config: Any,
    problems: Sequence[Any],
    settings: BiasSettings,
    *,
    lag: int,
    seed_path: Sequence[int] = (),
    reward_fn: Any = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Every method's bias at one (current, behavior) pair, at every group size of `settings`.

    current, behavior: the models (behavior None: on-policy, the check that every bias is 0);
    config: the run's `LLMTrainConfig` (temperature, lengths, method constants, task, reward);
    problems: the training pool; lag: learner versions between them (A-3PO reads it);
    seed_path: spawn key of this pair under `settings.seed`; progress(n): called per block.
    Returns `{"kl": interval, "by_group_size": {G: gram_statistics + diagnostics},
    "settings": asdict(settings)}`.
    """
    producer = _producers(current, behavior, tokenizer, config, problems, reward_fn)
    method_settings = MethodSettings.of(config)
    t = config.max_completion_tokens
    estimators = estimators_of(settings, method_settings, t)
    target = Estimator(
        "target", get_method("is").loss_config(method_settings, max_length=t), "loo", False
    )
    # the target: on-policy blocks of the current policy, kept for every group size
    target_vectors, kl_values = _target_blocks(
        current,
        behavior,
        producer,
        problems,
        target,
        settings,
        lag=lag,
        seed_path=seed_path,
        progress=progress,
    )
    out: dict[str, Any] = {
        "kl": mean_interval(kl_values, settings.level),
        "by_group_size": {},
    }
    for gi, group_size in enumerate(settings.group_sizes):
        out["by_group_size"][group_size] = _group_size_statistics(
            current,
            behavior,
            producer,
            problems,
            estimators,
            target_vectors,
            settings,
            group_size,
            lag=lag,
            seed_path=(*seed_path, 1 + gi),
            progress=progress,
        )
    out["settings"] = asdict(settings)
    return out


@torch.no_grad()
def _mean_log_ratio(
    current: torch.nn.Module, behavior: torch.nn.Module, batch: Any, chunk: int
) -> float:
    from llm_runs.batch import micro_logprobs

    lp, _ = micro_logprobs(current, batch, chunk)
    lb, _ = micro_logprobs(behavior, batch, chunk)
    mask = batch.response_mask().to(lp.device)
    return float(((lp - lb) * mask).sum(-1).double().mean())


# ----------------------------------------------------------------------------------------------
# A training run's checkpoints (`llm_runs.run_policies`), the findings
# ----------------------------------------------------------------------------------------------


def bias_of_run(
    run_dir: str | Path,
    settings: BiasSettings,
    *,
    steps: Sequence[int] | None = None,
    lag: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """`measure_bias` at checkpoints `steps` of a run (default: every checkpoint whose behavior
    policy `n - lag` is available, at most 3, evenly spaced), behavior `lag` updates earlier
    (default: the run's delay). Returns `{"run", "lag", "checkpoints": [{step, ...}], "findings"}`."""
    from llm_runs.arithmetic import ArithmeticTask
    from llm_runs.models import load_policy, resolve_placement
    from llm_runs.rollouts import Task

    config = run_config(run_dir)
    lag = config.delay if lag is None else lag
    if lag < 1:
        raise ValueError(f"lag must be >= 1 (the run's delay is {config.delay}): pass --lag")
    available = checkpoint_steps(run_dir)
    if steps is None:
        candidates = [s for s in available if s - lag in (set(available) | {0}) and s > lag]
        if not candidates:
            raise FileNotFoundError(
                f"{run_dir} has no checkpoint pair (n, n - {lag}); checkpoints: {available}. "
                f"Train with --set checkpoint_every={lag} --set keep_checkpoints=100"
            )
        picks = sorted({candidates[round(i * (len(candidates) - 1) / 2)] for i in range(3)})
        steps = picks if len(candidates) >= 3 else candidates
    placement = resolve_placement(config.placement_settings())  # as the run trained (device, dtype)
    problems = (
        Task(config).load_problems()[0]
        if config.task != "arithmetic"
        else ArithmeticTask(**config.arithmetic).problems()[0]
    )
    bar = None
    if progress:
        from tqdm.auto import tqdm

        per_pair = settings.target_blocks + settings.blocks * len(settings.group_sizes)
        bar = tqdm(total=per_pair * len(steps), desc="llm bias", unit="block")
    results = []
    try:
        for index, step in enumerate(steps):
            tokenizer, current = load_policy(policy_dir(run_dir, step), placement, False)
            _, behavior = load_policy(policy_dir(run_dir, step - lag), placement, False)
            for model in (current, behavior):
                model.eval()
            for p in behavior.parameters():
                p.requires_grad_(False)
            out = measure_bias(
                current,
                behavior,
                tokenizer,
                config,
                problems,
                settings,
                lag=lag,
                seed_path=(index,),
                progress=None if bar is None else bar.update,
            )
            results.append({"step": step, "behavior_step": step - lag, **out})
    finally:
        if bar is not None:
            bar.close()
    return {
        "run": str(run_dir),
        "lag": lag,
        "method_settings": asdict(MethodSettings.of(config)),
        "checkpoints": results,
        "findings": bias_findings(results, settings.level),
    }


def bias_findings(checkpoints: Sequence[dict[str, Any]], level: float) -> dict[str, Any]:
    """The toy sweep's findings, checked on the LM (see the module docstring)."""
    is_rows, paired_rows, shrink_rows = [], [], []
    for c in checkpoints:
        by_g = c["by_group_size"]
        for g, stats in by_g.items():
            methods = stats["methods"]
            if "is" in methods:
                interval = methods["is"]["bias_sq"]
                is_rows.append(
                    {
                        "step": c["step"],
                        "G": g,
                        **interval,
                        "zero_inside": interval["lo"] <= 0 <= interval["hi"],
                    }
                )
            if "gmc - tic" in stats["paired"]:
                interval = stats["paired"]["gmc - tic"]["bias_sq"]
                verdict = {"below 0": "holds", "above 0": "reversed"}.get(
                    interval_sign(interval), "not resolved"
                )
                paired_rows.append(
                    {
                        "step": c["step"],
                        "G": g,
                        "kl": c["kl"]["value"],
                        **interval,
                        "verdict": verdict,
                    }
                )
        sizes = sorted(by_g, key=int)
        if len(sizes) >= 2:
            small, large = by_g[sizes[0]]["methods"], by_g[sizes[-1]]["methods"]
            for name in ("gmc", "tic"):
                if name in small and name in large:
                    diff = independent_difference(
                        small[name]["bias_sq"], large[name]["bias_sq"], level
                    )
                    shrink_rows.append(
                        {
                            "step": c["step"],
                            "method": name,
                            "smallest_G": int(sizes[0]),
                            "largest_G": int(sizes[-1]),
                            **diff,
                            "shrinks": diff["lo"] > 0,
                        }
                    )
    return {
        "is_unbiased": {
            "holds": sum(r["zero_inside"] for r in is_rows),
            "of": len(is_rows),
            "points": is_rows,
        },
        "gmc_below_tic": {
            "holds": sum(r["verdict"] == "holds" for r in paired_rows),
            "reversed": sum(r["verdict"] == "reversed" for r in paired_rows),
            "of": len(paired_rows),
            "points": paired_rows,
        },
        "shrinks_with_G": shrink_rows,
    }
