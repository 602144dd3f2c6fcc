"""What the §3-§4 bounds are compared with, measured at the toy learner's actual states.

`BoundTracker` rides along a training run (`ToyTrainConfig.bound_every > 0`; the run loop calls
`before_step` and `after_step` around `AsyncLearner.train_step`) and adds `bounds/*` fields to the
step's metrics rows (`gmc_grpo.records.METRIC_NAMES` documents each). It reads only the learner's
public state (`theta`, `step`, `current_exact()`, `last`, `schedules`, `policy`, `mdp`) and draws
its own samples from its own generators, so a tracked run's learner records equal an untracked
run's (a test checks it).

Every step, per seed (cheap: parameter vectors and the `[Z, V]` table the learner computes anyway):

- `bounds/log_coverage`: `log C_n = -min_{s,a} log pi_{theta_n}(a | s)` over *every* state
  (Assumption 2 at the current policy; the behavior policies are earlier learner policies, so the
  run's `C` is the largest value over its steps);
- `bounds/drift_sq`: `||theta_n - theta_{n - tau}||^2` to the consumed batch's behavior parameters
  (mean over its groups when groups carry their own lags);
- `bounds/step_sq`: `||theta_{n+1} - theta_n||^2`, the size of this step's update;
- `bounds/grad_dot_step`: `<grad J(theta_n), theta_{n+1} - theta_n>`, the step's first-order gain;
- `bounds/lag_sq`, `bounds/lag_fourth`: mean of `tau^2`, `tau^4` over the batch's groups;
- `bounds/group_coef_max`: the largest group mass `(1/G) sum_i c_i` of the batch (trajectory-level
  methods; the class condition of eq. 5 is `<= 1 + eps`);
- `bounds/lipschitz_L`: Assumption 1's `L` of the policy class (`lipschitz_constant()`, exact).

Every `bound_every` steps and at the last step, per seed, from `bound_minibatches` fresh
minibatches drawn from the batch's behavior policies (each group from its own `theta_{n - tau}`)
and evaluated at `theta_n`, i.e. the estimator's conditional law given the history `F_n^-`
(`toy_mdps.statistics`, against the exact `grad J(theta_n) / T`, 95% intervals):

- `bounds/bias_sq`, `_lo`, `_hi`: `||E[g_n | F_n^-] - grad J(theta_n) / T||^2` (U-statistic);
- `bounds/second_moment`, `_lo`, `_hi`: `E[||g_n||^2 | F_n^-]`;
- `bounds/removed_mass`, `_lo`, `_hi`: `E[(1/B) sum_b (1/G) sum_i (rho_i - c_i) | F_n^-]`;
- `bounds/grad_dot_bias`, `_lo`, `_hi`: `<grad J(theta_n), b_n>`, how much the bias turns the
  expected update away from the gradient;
- `bounds/kl_mean`, `bounds/kl_max`: exact `KL(pi_{theta_n}(.|x) || pi_{theta_{n-tau}}(.|x))`,
  mean and largest over all prompts.

The bounds themselves are evaluated from these records by `evidence.measured` (no torch).

Shapes: `S` seeds, `B` groups, `G` responses per group, `P` parameters, `K` prompts, `Z` states.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from gmc_grpo.estimators import coefficients
from gmc_grpo.seeding import stream_seed
from gmc_grpo.staleness import Schedule
from toy_mdps.enumeration import response_token_logprobs
from toy_mdps.statistics import (
    Estimates,
    chunked_estimates,
    mean_interval,
    sample_groups,
    summarise,
)
from toy_mdps.train.learner import AsyncLearner, batched_logits


def pending_versions(schedule: Schedule[Any]) -> list[int]:
    """Behavior versions of the items a schedule has launched and not handed out yet."""
    return [int(entry.behavior_version) for entry in schedule.pending_entries()]


def statistics_seed(run_seed: int, seed: int, step: int) -> int:
    """Generator seed of the estimator statistics of `seed` at learner step `step`.

    A fresh generator per recorded step (stream `toy_statistics` of `gmc_grpo.seeding` at
    `(seed, step)`): a resumed run draws the same samples, the learner's own generators are
    never touched, and no step's stream is any learner's (the hand-mixed seeds before gave step
    `k` of run seed `r` the learner stream of run seed `r + k + 1`).
    """
    return stream_seed(run_seed, "toy_statistics", seed, step)


def _group_lags(learner: AsyncLearner, rows: list[dict[str, Any]]) -> Tensor:
    """`[S, B]` realised lag of every consumed group (one lag per batch is broadcast)."""
    S, B = len(rows), learner.config.num_groups
    lag = learner.last.get("lag")
    if lag is None:
        lag = torch.tensor([float(r["staleness/lag"]) for r in rows], dtype=torch.float64)
    lag = lag.to(torch.float64)
    if lag.dim() == 1:
        lag = lag.unsqueeze(1)
    return lag.expand(S, B).round().long()


class BoundTracker:
    """Per-step measurements beside the bounds of §3-§4 (see the module docstring).

    Attributes:
        history: learner version -> `[S, *param]` parameters, kept while some schedule still holds
            a batch generated from that version (and for the current step).
    """

    def __init__(self, learner: AsyncLearner) -> None:
        cfg = learner.config
        if cfg.bound_every < 1:
            raise ValueError(
                f"ToyTrainConfig.bound_every={cfg.bound_every}: the tracker needs bound_every >= 1"
            )
        self.config = cfg
        self.lipschitz = float(learner.policy.lipschitz_constant())
        self.history: dict[int, Tensor] = {}
        self._log_table: Tensor | None = None
        self._gradient: Tensor | None = None
        self._response_logprobs: Tensor | None = None

    # -- the two calls of the run loop ----------------------------------------------------------
    def before_step(self, learner: AsyncLearner) -> None:
        """Keep `theta_n` and the exact quantities at `theta_n` (the learner computes them anyway:
        `current_exact` is cached and reused by `train_step`)."""
        exact = learner.current_exact()
        self.history[learner.step] = learner.theta.clone()
        self._log_table = exact.log_table
        self._gradient = exact.gradient
        self._response_logprobs = exact.response_logprobs

    def after_step(self, learner: AsyncLearner, rows: list[dict[str, Any]]) -> None:
        """Add the `bounds/*` fields of step `n = learner.step - 1` to `rows` (one per seed)."""
        if self._log_table is None or self._gradient is None:
            raise RuntimeError("BoundTracker.after_step called without before_step")
        n = learner.step - 1
        theta_n = self.history[n]
        S = theta_n.shape[0]
        lags = _group_lags(learner, rows)  # [S, B]
        flat_n = theta_n.reshape(S, -1)
        step = learner.theta.reshape(S, -1) - flat_n
        step_sq = step.pow(2).sum(dim=1)
        grad_dot_step = (self._gradient.reshape(S, -1) * step).sum(dim=1)
        log_cov = -self._log_table.reshape(S, -1).amin(dim=1)
        coef_max = self._group_coef_max(learner)
        record = n % self.config.bound_every == 0 or n == self.config.total_steps - 1
        for s, row in enumerate(rows):
            drift = [
                float((flat_n[s] - self.history[n - int(t)][s].reshape(-1)).pow(2).sum())
                for t in lags[s].tolist()
            ]
            lag = lags[s].double()
            row["bounds/log_coverage"] = float(log_cov[s])
            row["bounds/drift_sq"] = sum(drift) / len(drift)
            row["bounds/step_sq"] = float(step_sq[s])
            row["bounds/grad_dot_step"] = float(grad_dot_step[s])
            row["bounds/lag_sq"] = float(lag.pow(2).mean())
            row["bounds/lag_fourth"] = float(lag.pow(4).mean())
            row["bounds/group_coef_max"] = None if coef_max is None else float(coef_max[s])
            row["bounds/lipschitz_L"] = self.lipschitz
            if record:
                row.update(self._statistics(learner, s, n, lags[s]))
        self._prune(learner)

    # -- helpers --------------------------------------------------------------------------------
    def _group_coef_max(self, learner: AsyncLearner) -> Tensor | None:
        """`[S]` largest `(1/G) sum_i c_i` over the batch's groups (trajectory-level methods)."""
        log_ratio = learner.last.get("log_ratio")
        if log_ratio is None or not learner.spec.trajectory_level:
            return None
        loss = learner.spec.loss_config(learner.settings, max_length=self.config.max_length)
        coef = coefficients(
            loss.method,
            log_ratio,
            loss.eps,
            truncation=loss.truncation,
            rule=loss.coefficient_rule,
        )  # [S, B, G]
        return coef.double().mean(dim=-1).amax(dim=-1)

    def _behavior_table(self, learner: AsyncLearner, seed_index: int, version: int) -> Tensor:
        theta = self.history[version][seed_index : seed_index + 1]
        return torch.log_softmax(batched_logits(learner.policy, theta), dim=-1)[0]

    def _statistics(
        self, learner: AsyncLearner, seed_index: int, n: int, lags: Tensor
    ) -> dict[str, float | None]:
        """Estimator statistics of seed `seed_index` at step `n` (module docstring)."""
        cfg, mdp = self.config, learner.mdp
        assert self._log_table is not None and self._gradient is not None
        assert self._response_logprobs is not None
        log_table = self._log_table[seed_index]
        target = self._gradient[seed_index].reshape(-1) / mdp.max_length
        current = self._response_logprobs[seed_index]  # [K, n_x]
        gen = torch.Generator().manual_seed(statistics_seed(cfg.run_seed, cfg.seeds[seed_index], n))
        loss = learner.spec.loss_config(learner.settings, max_length=cfg.max_length)
        advantage = learner.spec.advantage_kind(cfg.advantage)
        B = lags.numel()
        parts: list[tuple[float, Estimates]] = []
        kl_mean = 0.0
        kl_max = 0.0
        for lag, count in zip(*torch.unique(lags, return_counts=True), strict=True):
            lag_i, count_i = int(lag), int(count)
            behavior = self._behavior_table(learner, seed_index, n - lag_i)
            behavior_lp = response_token_logprobs(mdp, behavior).sum(dim=-1)  # [N]
            beh = behavior_lp.view(mdp.num_prompts, -1)
            kl = (current.exp() * (current - beh)).sum(dim=-1).clamp(min=0.0)  # [K]
            kl_mean += count_i / B * float(kl.mean())
            kl_max = max(kl_max, float(kl.max()))
            _, responses = sample_groups(
                mdp, behavior_lp, cfg.bound_minibatches, count_i, cfg.group_size, gen
            )
            est = chunked_estimates(
                mdp,
                responses,
                log_table,
                behavior,
                loss,
                advantage=advantage,
                version_lag=float(lag_i),
                policy=learner.policy,
            )
            parts.append((count_i / B, est))
        combined = Estimates(
            gradients=sum(w * e.gradients for w, e in parts),  # type: ignore[arg-type]
            removed_mass=sum(w * e.removed_mass for w, e in parts),  # type: ignore[arg-type]
            capped_frac=sum(w * e.capped_frac for w, e in parts),  # type: ignore[arg-type]
            clipped_token_frac=sum(w * e.clipped_token_frac for w, e in parts),  # type: ignore[arg-type]
            log_ratio_max=torch.stack([e.log_ratio_max for _, e in parts]).amax(dim=0),
        )
        stats = summarise(combined, target)
        # <grad J, b_n>: the first-order effect of the bias on the ascent (unbiased per minibatch)
        grad = target * mdp.max_length
        inner = mean_interval(combined.gradients.double() @ grad - float(target @ grad))
        out: dict[str, float | None] = {"bounds/kl_mean": kl_mean, "bounds/kl_max": kl_max}
        for name, interval in (
            ("bias_sq", stats.bias.interval),
            ("second_moment", stats.second_moment),
            ("removed_mass", stats.removed_mass),
            ("grad_dot_bias", inner),
        ):
            for suffix, value in (("", interval.value), ("_lo", interval.lo), ("_hi", interval.hi)):
                out[f"bounds/{name}{suffix}"] = value if math.isfinite(value) else None
        return out

    def _prune(self, learner: AsyncLearner) -> None:
        """Forget the parameters no pending batch was generated from (the next step's `theta` is
        stored by the next `before_step`)."""
        keep = min(
            (v for sched in learner.schedules for v in pending_versions(sched)),
            default=learner.step,
        )
        for version in [v for v in self.history if v < min(keep, learner.step)]:
            del self.history[version]

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The parameters still needed (a resumed run's drifts and statistics use them)."""
        return {"history": {int(v): t.clone() for v, t in self.history.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = {int(v): t.clone() for v, t in state["history"].items()}
