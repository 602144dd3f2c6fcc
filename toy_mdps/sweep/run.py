"""`gmc-grpo toy sweep`: estimator statistics over a grid, resumable, with the paper's checks.

Grid: `seed x staleness x G` cells; in each cell one set of `M` minibatches is drawn from the
behavior policy and shared by every method and `eps` (common random numbers), then one row per
`(method, eps)` is appended to `metrics.jsonl` of the run directory (flushed per line). A killed
sweep restarted on the same directory skips the rows already written (`RunWriter.resume`)
and continues; each cell's samples are drawn from a generator seeded by `(seed, staleness index,
G)`, so a resumed sweep reproduces the rows an uninterrupted one would have written. At the end
`results.csv` (one row per grid point, the columns of `TABLE_COLUMNS`) and `summary.json` (the
headline checks, `toy_mdps.sweep.analysis`) are written. The figures are drawn from these files
afterwards (`figures.toy_bias`; `gmc-grpo toy sweep` does it through `pipeline.toy`).

Which methods depend on `eps`, which are in the weighted class (Prop. 1's bound) and which
removed-mass bound each obeys are read from the method registry (`gmc_grpo.methods`).
"""

from __future__ import annotations

import csv
import math
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from gmc_grpo.defaults import PAPER_EPS
from gmc_grpo.json_files import atomic_write_text, read_jsonl
from gmc_grpo.methods import MethodSettings, MethodSpec, get_method
from gmc_grpo.records import read_run_config
from gmc_grpo.resume import ResumeConfigError, config_differences
from gmc_grpo.run_writer import RecordsExistError, RunWriter, check_same_kind, erased_text
from gmc_grpo.runlock import locks_folder
from gmc_grpo.seeding import check_seeding, stream_seed
from toy_mdps.behavior import behavior_at_delay, perturb_to_kl, reference_trajectory
from toy_mdps.enumeration import (
    coverage_constant,
    exact_chi_square,
    exact_gradient,
    exact_kl,
    exact_objective,
    exact_token_entropy,
    log_policy_table,
    response_token_logprobs,
)
from toy_mdps.jobs import check_jobs, single_thread, worker_pool
from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import make_policy
from toy_mdps.problem import make_mdp
from toy_mdps.statistics import (
    advantage_kind,
    chunked_estimates,
    chunked_sample_tensors,
    sample_groups,
    summarise,
)
from toy_mdps.sweep.analysis import summarise_sweep
from toy_mdps.sweep.config import SweepConfig

# `SweepConfig` fields a resumed sweep may change (drawing only); any other change is refused
RESUME_FREE_FIELDS = ("figures",)
# how a refused fresh start continues, in the messages of this command
FRESH_HINT = "rerun it with its config to continue it, pass --fresh to start over, or choose --out"

# Every column of the results table, with its meaning (namespaced like gmc_grpo.records).
TABLE_COLUMNS: dict[str, str] = {
    "step": "row index in metrics.jsonl (grid-point order)",
    "method": "estimator: is, grpo, tic, gmc, vcpo, a3po (or a registered one)",
    "behavior": "trajectory (delay) or direct (target KL)",
    "staleness": "delay tau (trajectory mode) or target mean KL (direct mode)",
    "eps": "cap 1 + eps of TIC and GMC (null for the methods that do not use it, uses_eps)",
    "group_size": "G",
    "num_groups": "B",
    "num_minibatches": "M",
    "seed": "replicate seed",
    "advantage": "advantage kind used",
    "ratio/kl_exact": "exact KL(pi_theta || mu), mean over prompts",
    "ratio/kl_exact_max": "exact KL, largest over prompts",
    "ratio/chi_square_exact": "exact chi^2(pi_theta || mu), mean over prompts",
    "ratio/chi_square_exact_max": "exact chi^2, largest over prompts",
    "estimator/effective_draws": "draws per prompt / (1 + chi^2 max): below ~100 the Monte Carlo "
    "intervals of IS-like estimators are unreliable (heavy-tailed ratios are rarely sampled)",
    "policy/coverage_C": "Assumption 2's C = 1 / min token probability of pi_theta and mu",
    "policy/entropy": "mean per-token entropy of pi_theta (nats), mean over prompts",
    "policy/objective": "exact J(theta)",
    "policy/grad_norm_sq": "exact ||grad J(theta)||^2",
    "estimator/target_norm_sq": "||grad J / T||^2, the scale the squared bias compares to",
    "estimator/bias_sq": "debiased squared bias ||E g - grad J / T||^2 (U-statistic)",
    "estimator/bias_sq_lo": "lower end of its confidence interval (jackknife, normal)",
    "estimator/bias_sq_hi": "upper end",
    "estimator/bias_sq_raw": "||mean g - grad J / T||^2 before removing the MC noise",
    "estimator/mc_noise": "tr(Cov g) / M, the MC noise removed",
    "estimator/relative_bias_sq": "bias_sq / target_norm_sq",
    "estimator/second_moment": "E ||g||^2",
    "estimator/second_moment_lo": "lower end of its interval",
    "estimator/second_moment_hi": "upper end",
    "ratio/removed_mass": "mean per group of (1/G) sum (1 - w_i) rho_i (class methods)",
    "ratio/removed_mass_lo": "lower end of its interval",
    "ratio/removed_mass_hi": "upper end",
    "ratio/capped_frac": "fraction of groups (GMC) / trajectories (TIC, VCPO) with w < 1",
    "ratio/capped_frac_lo": "lower end of its interval",
    "ratio/capped_frac_hi": "upper end",
    "ratio/clipped_token_frac": "fraction of tokens (A != 0) whose gradient GRPO/A-3PO removed",
    "ratio/clipped_token_frac_lo": "lower end of its interval",
    "ratio/clipped_token_frac_hi": "upper end",
    "ratio/log_max": "largest trajectory log-ratio s_i seen over all minibatches",
    "chain/removed_mass_bound": "KL / log(1+2 eps) (GMC) or KL / c_eps (TIC), theory.constants "
    "(the spec's removed_mass_bound)",
    "chain/removed_mass_bound_holds": "removed_mass_lo <= bound",
    "chain/second_moment_bound": "Prop. 1: 8/T (1+eps) L R^2 log|A| (theory.bounds); eps = the "
    "spec's class_cap (c - 1 for VCPO), the paper's 0.28 for is/grpo/a3po (outside the class)",
    "chain/second_moment_exceeds": "second_moment_lo > bound",
    "chain/kl_drift_bound": "step 3 of §4.2: (T L / 2) ||theta - theta_behavior||^2",
    "chain/kl_drift_bound_holds": "exact KL (max over prompts) <= that bound",
    "mdp/lipschitz_L": "L of Assumption 1 for the policy class",
    "mdp/reward_max_R": "R",
    "mdp/vocab_size": "|A| = V",
    "mdp/max_length_T": "T",
    "perf/wall_s": "seconds spent on this row (sampling shared per cell not included)",
}


def row_key(row: dict[str, Any]) -> tuple[str, float, float | None, int, int]:
    """Identity of a grid point: `(method, staleness, eps, G, seed)`."""
    eps = row.get("eps")
    return (
        str(row["method"]),
        float(row["staleness"]),
        None if eps is None else float(eps),
        int(row["group_size"]),
        int(row["seed"]),
    )


def grid_points(config: SweepConfig) -> Iterator[tuple[int, int, float, int, str, float | None]]:
    """`(seed, staleness index, staleness, G, method, eps)` in run order (cells outermost)."""
    for seed in config.seeds:
        for si, staleness in enumerate(config.staleness_values):
            for group_size in config.group_sizes:
                for method in config.methods:
                    eps_list: list[float | None] = (
                        list(config.eps_values) if get_method(method).uses_eps else [None]
                    )
                    for eps in eps_list:
                        yield seed, si, staleness, group_size, method, eps


def _cell_seed(seed: int, staleness_index: int, group_size: int, run_seed: int = 0) -> int:
    """The generator seed of one grid cell `(replicate, staleness, G)`: stream `sweep_cell` of
    `gmc_grpo.seeding` under `run_seed` (every cell of every grid its own stream)."""
    return stream_seed(run_seed, "sweep_cell", seed, staleness_index, group_size)


def _pair(config: SweepConfig, mdp: TokenMDP, seed: int, staleness: float, cache: dict) -> tuple:
    """`(theta, theta_behavior, version_lag)` for a seed and staleness value."""
    policy = make_policy(mdp, config.policy)
    # three streams: before, one seed served all three, so the first noise step and the direct
    # mode's direction were parallel to theta_0 (the same standard normal draws)
    theta0 = policy.random_parameters(
        stream_seed(config.init_seed, "sweep_theta0", seed), config.init_scale
    )
    if config.behavior == "trajectory":
        if seed not in cache:
            cache[seed] = reference_trajectory(
                mdp,
                theta0,
                config.trajectory_steps,
                config.lr,
                noise_std=config.trajectory_noise,
                seed=stream_seed(config.init_seed, "sweep_trajectory", seed),
                policy=policy,
            )
        theta, theta_b = behavior_at_delay(cache[seed], int(staleness))
        return theta, theta_b, float(staleness)
    theta_b = perturb_to_kl(
        mdp,
        theta0,
        float(staleness),
        seed=stream_seed(config.init_seed, "sweep_direction", seed),
        direction=config.direction,
        policy=policy,
    )
    return theta0, theta_b, float(config.direct_version_lag)


def _settings(config: SweepConfig, eps: float | None) -> MethodSettings:
    return MethodSettings.of(config, eps=PAPER_EPS if eps is None else eps)


def _bound_eps(spec: MethodSpec, eps: float | None, settings: MethodSettings) -> float:
    """The `eps` of Prop. 1's bound: the grid's, the method's class cap, or the paper's 0.28
    for the methods outside the class (the bound is then a reference line)."""
    if eps is not None:
        return eps
    return spec.class_cap(settings) if spec.class_cap is not None else PAPER_EPS


def _none_if_nan(x: float) -> float | None:
    return None if math.isnan(x) else x


class CellComputer:
    """Computes the rows of grid cells `(seed, staleness, G)`, with the caches they share.

    Holds the MDP, the policy, the reference trajectories (per seed), the current
    `(theta, theta_behavior)` pair with its exact quantities, the current cell's samples and
    their method-independent tensors, and the `[M, P]` buffer every row's gradients go into.
    Rows come back without their `step` (the writer numbers them in grid order).
    """

    def __init__(self, config: SweepConfig) -> None:
        from theory.bounds import second_moment_bound
        from theory.constants import c_eps, gmc_denominator

        self.config = config
        self.mdp = make_mdp(config)
        self.policy = make_policy(self.mdp, config.policy)
        self.second_moment_bound = second_moment_bound
        # the removed-mass bounds of §4.2 (step 2), named by the specs' `removed_mass_bound`
        self.removed_mass_denominator = {"gmc": gmc_denominator, "tic": c_eps}
        self.trajectories: dict[int, torch.Tensor] = {}
        self.pair_key: tuple[int, int] | None = None
        self.pair: dict[str, Any] = {}
        parameters = int(self.policy.random_parameters(0).numel())
        self.workspace = torch.empty(config.num_minibatches, parameters, dtype=self.mdp.dtype)

    def _set_pair(self, seed: int, si: int, staleness: float) -> None:
        if self.pair_key == (seed, si):
            return
        mdp, policy, T = self.mdp, self.policy, self.mdp.max_length
        L = policy.lipschitz_constant()
        theta, theta_b, lag = _pair(self.config, mdp, seed, staleness, self.trajectories)
        kl = exact_kl(mdp, theta, theta_b, policy)
        chi2 = exact_chi_square(mdp, theta, theta_b, policy)
        grad = exact_gradient(mdp, theta, policy)
        self.pair_key = (seed, si)
        self.pair = {
            "theta": theta,
            "theta_b": theta_b,
            "lag": lag,
            "log_table": log_policy_table(mdp, theta, policy),
            "behavior_table": log_policy_table(mdp, theta_b, policy),
            "target": grad.reshape(-1) / T,
            "exact": {
                "ratio/kl_exact": float(kl.mean()),
                "ratio/kl_exact_max": float(kl.max()),
                "ratio/chi_square_exact": float(chi2.mean()),
                "ratio/chi_square_exact_max": float(chi2.max()),
                "policy/coverage_C": coverage_constant(mdp, theta, theta_b, policy=policy),
                "policy/entropy": float(exact_token_entropy(mdp, theta, policy).mean()),
                "policy/objective": float(exact_objective(mdp, theta, policy)),
                "policy/grad_norm_sq": float((grad**2).sum()),
                "estimator/target_norm_sq": float(((grad / T) ** 2).sum()),
            },
            "drift_bound": T * L / 2 * float(((theta - theta_b) ** 2).sum()),
        }

    def rows(
        self,
        seed: int,
        si: int,
        staleness: float,
        group_size: int,
        methods: list[tuple[str, float | None]],
    ) -> list[dict[str, Any]]:
        """The rows of `(method, eps)` in `methods` for one cell, in that order."""
        config, mdp, policy = self.config, self.mdp, self.policy
        T = mdp.max_length
        started = time.perf_counter()
        self._set_pair(seed, si, staleness)
        pair = self.pair
        gen = torch.Generator().manual_seed(_cell_seed(seed, si, group_size, self.config.run_seed))
        behavior_lp = response_token_logprobs(mdp, pair["behavior_table"]).sum(dim=-1)
        _, responses = sample_groups(
            mdp, behavior_lp, config.num_minibatches, config.num_groups, group_size, gen
        )
        samples = chunked_sample_tensors(mdp, responses, pair["log_table"], pair["behavior_table"])
        out = []
        for method, eps in methods:
            spec = get_method(method)
            settings = _settings(config, eps)
            loss_config = spec.loss_config(settings, max_length=T)
            est = chunked_estimates(
                mdp,
                responses,
                pair["log_table"],
                pair["behavior_table"],
                loss_config,
                advantage=advantage_kind(method, config.advantage),  # type: ignore[arg-type]
                version_lag=pair["lag"],
                policy=policy,
                samples=samples,
                out=self.workspace,
            )
            stats = summarise(est, pair["target"], config.confidence, in_place=True)
            row = self._row(method, eps, spec, settings, seed, staleness, group_size, est, stats)
            row["perf/wall_s"] = time.perf_counter() - started
            out.append(row)
            started = time.perf_counter()
        return out

    def _row(
        self,
        method: str,
        eps: float | None,
        spec: MethodSpec,
        settings: MethodSettings,
        seed: int,
        staleness: float,
        group_size: int,
        est: Any,
        stats: Any,
    ) -> dict[str, Any]:
        """One row of `rows` (all but `perf/wall_s`): the cell, the pair's exact quantities, the
        estimator's statistics `stats` (`summarise` of `est`) and the chain's bounds."""
        config, mdp, pair = self.config, self.mdp, self.pair
        T, L = mdp.max_length, self.policy.lipschitz_constant()
        exact = pair["exact"]
        kl_mean = exact["ratio/kl_exact"]
        bound_eps = _bound_eps(spec, eps, settings)
        sm_bound = float(
            self.second_moment_bound(bound_eps, T, L, config.reward_scale, config.vocab_size)
        )
        removed_bound = None
        if spec.removed_mass_bound is not None:
            denominator = self.removed_mass_denominator[spec.removed_mass_bound]
            removed_bound = kl_mean / float(denominator(settings.eps))
        b = stats.bias
        return {
            "method": method,
            "behavior": config.behavior,
            "staleness": staleness,
            "eps": eps,
            "group_size": group_size,
            "num_groups": config.num_groups,
            "num_minibatches": config.num_minibatches,
            "seed": seed,
            "advantage": advantage_kind(method, config.advantage),  # type: ignore[arg-type]
            **exact,
            "estimator/bias_sq": b.interval.value,
            "estimator/bias_sq_lo": b.interval.lo,
            "estimator/bias_sq_hi": b.interval.hi,
            "estimator/bias_sq_raw": b.raw,
            "estimator/mc_noise": b.noise,
            "estimator/relative_bias_sq": b.interval.value / exact["estimator/target_norm_sq"]
            if exact["estimator/target_norm_sq"] > 0
            else None,
            "estimator/effective_draws": config.num_minibatches
            * config.num_groups
            * group_size
            / mdp.num_prompts
            / (1.0 + exact["ratio/chi_square_exact_max"]),
            "estimator/second_moment": stats.second_moment.value,
            "estimator/second_moment_lo": stats.second_moment.lo,
            "estimator/second_moment_hi": stats.second_moment.hi,
            "ratio/removed_mass": _none_if_nan(stats.removed_mass.value),
            "ratio/removed_mass_lo": _none_if_nan(stats.removed_mass.lo),
            "ratio/removed_mass_hi": _none_if_nan(stats.removed_mass.hi),
            "ratio/capped_frac": _none_if_nan(stats.capped_frac.value),
            "ratio/capped_frac_lo": _none_if_nan(stats.capped_frac.lo),
            "ratio/capped_frac_hi": _none_if_nan(stats.capped_frac.hi),
            "ratio/clipped_token_frac": _none_if_nan(stats.clipped_token_frac.value),
            "ratio/clipped_token_frac_lo": _none_if_nan(stats.clipped_token_frac.lo),
            "ratio/clipped_token_frac_hi": _none_if_nan(stats.clipped_token_frac.hi),
            "ratio/log_max": float(est.log_ratio_max.max()),
            "chain/removed_mass_bound": removed_bound,
            "chain/removed_mass_bound_holds": None
            if removed_bound is None
            else bool(stats.removed_mass.lo <= removed_bound),
            "chain/second_moment_bound": sm_bound,
            "chain/second_moment_exceeds": bool(stats.second_moment.lo > sm_bound),
            "chain/kl_drift_bound": pair["drift_bound"],
            "chain/kl_drift_bound_holds": bool(
                exact["ratio/kl_exact_max"] <= pair["drift_bound"] * (1 + 1e-9)
            ),
            "mdp/lipschitz_L": L,
            "mdp/reward_max_R": config.reward_scale,
            "mdp/vocab_size": config.vocab_size,
            "mdp/max_length_T": T,
        }


# one CellComputer per worker process of a parallel sweep (built by `_init_worker`)
_WORKER: CellComputer | None = None


def _init_worker(config_dict: dict[str, Any]) -> None:
    global _WORKER
    single_thread()
    _WORKER = CellComputer(SweepConfig.from_dict(config_dict))


def _worker_rows(cell: tuple[Any, ...]) -> list[dict[str, Any]]:
    assert _WORKER is not None
    return _WORKER.rows(*cell)


def _cells(todo: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """`(seed, si, staleness, G, [(method, eps), ...])` per grid cell, in grid order."""
    cells: list[tuple[Any, ...]] = []
    for seed, si, staleness, group_size, method, eps in todo:
        if cells and cells[-1][:4] == (seed, si, staleness, group_size):
            cells[-1][4].append((method, eps))
        else:
            cells.append((seed, si, staleness, group_size, [(method, eps)]))
    return cells


def _is_sweep_config(config: Mapping[str, Any]) -> bool:
    """A run's `config` written by `toy sweep` (the only one with `num_minibatches`)."""
    return "num_minibatches" in config


@locks_folder("run_dir")
def run_sweep(
    config: SweepConfig,
    run_dir: str | Path,
    *,
    fresh: bool = False,
    progress: bool = True,
    jobs: int = 1,
) -> list[dict[str, Any]]:
    """Run (or resume) the sweep in `run_dir`; returns all rows of the results table.

    `fresh=True` discards rows already in `run_dir`. Resuming a directory written with a
    different config is refused (the message names each differing field with its old and new
    value; only `RESUME_FREE_FIELDS` may change); a folder that holds records but no sweep
    config is refused too.
    `jobs > 1` computes that many grid cells at once in worker processes (one torch thread
    each); the rows are written in grid order and equal those of `jobs=1` with one thread.
    Holds `run_dir`'s lock throughout (`gmc_grpo.runlock`: a second writer is refused).
    """
    from tqdm import tqdm

    check_jobs(jobs)
    run_dir = Path(run_dir)
    if fresh:
        check_same_kind(run_dir, is_own=_is_sweep_config, kind="toy sweep")
        erased = erased_text(run_dir)
        if erased:
            print(f"--fresh: erasing the rows of {run_dir} ({erased})", file=sys.stderr)
    payload = None if fresh else read_run_config(run_dir)
    if payload is not None:
        check_seeding(payload.get("seeding"), str(run_dir), what="sweep")
        previous = payload.get("config")
        if not isinstance(previous, dict) or not _is_sweep_config(previous):
            raise RecordsExistError(
                f"{run_dir} holds another kind of run (its config.json is not a sweep's): "
                "choose another --out"
            )
        changes = config_differences(previous, config.to_dict(), SweepConfig().to_dict())
        refused = {k: v for k, v in changes.items() if k not in RESUME_FREE_FIELDS}
        if refused:
            detail = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in refused.items())
            raise ResumeConfigError(
                f"{run_dir} holds a sweep with another config ({detail}): rerun it with its "
                "config to continue it, pass --fresh to start over (erases its rows), or choose "
                "another --out"
            )
        rows = read_jsonl(run_dir / "metrics.jsonl")  # skips a torn last line
        # keep_steps_below rewrites metrics.jsonl without the torn line a killed run may have
        # left (appending after it would corrupt the file); rows carry step = 0..n-1.
        writer = RunWriter.resume(
            run_dir,
            config.to_dict(),
            keep_steps_below=len(rows),
            segment={"config_changes": {k: [a, b] for k, (a, b) in changes.items()}},
        )
    else:
        rows = []
        writer = RunWriter.fresh(run_dir, config.to_dict(), overwrite=fresh, hint=FRESH_HINT)
    done = {row_key(r) for r in rows}
    points = list(grid_points(config))
    todo = [p for p in points if (p[4], float(p[2]), p[5], p[3], p[0]) not in done]
    cells = _cells(todo)
    step = len(rows)
    bar = tqdm(
        total=len(points), initial=len(points) - len(todo), desc="toy sweep", disable=not progress
    )
    pool = None
    try:
        if jobs == 1:
            computer = CellComputer(config)
            results: Iterator[list[dict[str, Any]]] = (computer.rows(*cell) for cell in cells)
        else:
            pool = worker_pool(jobs, _init_worker, config.to_dict())
            results = pool.map(_worker_rows, cells)
        for cell_rows in results:
            for row in cell_rows:
                row = {"step": step, **row}
                writer.log_metrics(row)
                rows.append(row)
                step += 1
                bar.update(1)
        bar.close()
        if progress:
            print(
                f"writing {run_dir}/results.csv and the checks of the paper's chain "
                "(summary.json) ...",
                file=sys.stderr,
                flush=True,
            )
        rows = read_jsonl(run_dir / "metrics.jsonl")
        write_table(rows, run_dir / "results.csv")
        writer.write_summary(summarise_sweep(rows, config))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        bar.close()
        writer.close()
    return rows


def write_table(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Write the results table as CSV (columns of `TABLE_COLUMNS`, empty cell for null)."""
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(TABLE_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in TABLE_COLUMNS})
    atomic_write_text(path, buffer.getvalue())
