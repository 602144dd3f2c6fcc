"""Asynchronous learners on the token MDPs, vectorised over a leading seed dimension.

`AsyncLearner` runs `S` independent learners at once (one per seed, `ToyTrainConfig.seeds`). Every
learner step:

1. computes the exact quantities of the current policies `theta_n` `[S, P]` (`J`, `grad J`,
   token entropy, every response's log-probability) by a recursion over the prefix tree, for
   all seeds at once (`toy_mdps.train.tree`);
2. asks each seed's staleness schedule (`gmc_grpo.staleness`) for the groups it consumes; new
   groups are drawn from the current policy of that seed with that seed's generator. The draws
   are made at launch (the seed's generator, in launch order) and turned into responses for all
   seeds at once (one inverse-CDF `searchsorted` into the seeds' response distributions) unless a
   schedule needs a group's lengths at launch (length-coupled and length-proportional times),
   which resolves that group on the spot;
3. computes the method's per-token gradient weights `psi` `[S, B, G, T]` with the core library
   (`gmc_grpo.losses.gradient_weights`) and turns them into the update direction
   `g = sum psi grad log pi(y_t | s_t)` with the exact per-token softmax scores (no autograd);
4. applies the method's hooks from its registry spec (`gmc_grpo.methods`: VCPO's ESS step size,
   GAC's projection), clips `g` per seed and takes an ascent step (SGD or Adam, elementwise and
   so independent per seed) with the warm-up + cosine schedule (`gmc_grpo.lr_schedule`).

**Per-group behavior versions.** A batch is `B` groups, each with its own behavior version: the
batch schedules (`fixed_delay`, `length_coupled`) hand out whole batches whose groups share one
version, the worker schedule (`workers`, §2.2 / Figure 1) hands out single groups launched at
different versions. Each group keeps the token log-probs of the snapshot it was generated from
(`behavior_token_logprobs`), so its ratios `pi_{theta_n}(y) / pi_{theta_(n - tau_b)}(y)` use its
own snapshot, GMC's cap acts per group as always, and A-3PO gets each group's own lag
(`last["lag"]` `[S, B]`).

**Seeds and schedules (design).** Each seed owns its own `torch.Generator` (stream
`toy_learner` of `gmc_grpo.seeding`, path `(seed,)` under the run seed) and its own schedule
object whose items hold that seed's samples; the worker schedule's durations come from its own
generator (stream `toy_schedule`, the same path), so two
methods run on the same seed see the same lags under constant and exponential times (paired
comparisons). Every tensor computation (exact quantities, sampling, log-probs, advantages,
`psi`, gradients, metrics, optimizer) is one batched operation over `[S, ...]`; per seed remain
the schedules' bookkeeping, two generator calls per launch and the registry's per-sample hooks
(VCPO's step size, GAC's projection). Seed `s`'s trajectory is identical whether it runs alone
or together with other seeds (a test checks it), so the vectorised run is a pure speed-up
(`bench/bench_toy_seeds.py` measures how much).

**Initial parameters.** All seeds start from the same `theta_0` (stream `toy_init` of
`init_seed`): the
seeds replicate the sampling noise of one learning problem, so averages over seeds estimate
expectations of the stochastic learner (e.g. the IS learner at `D = 0` against exact gradient
ascent).

**Methods** come from the registry (`gmc_grpo.methods.get_method(config.method)`); nothing
here names one. The spec's loss gives `psi` (`token_gradient_weights`, with its coefficient rule
for a user's method); a `baseline` hook that needs score norms gets the exact per-trajectory
`||grad log pi(y_i)||^2`: with the per-token logit scores `e_t = onehot(y_t) - pi(. | s_t)` and
features `h(s)`, `||sum_t e_t (x) h(s_t)||^2 = sum_{t,t'} (e_t . e_t') (h(s_t) . h(s_t'))`
(tabular: `h` one-hot) -- VCPO's minimum-variance baseline. A `gradient_edit` hook (GAC's
projection, our interpretation) edits each seed's flattened direction with that seed's state;
a `step_scale` hook (VCPO's ESS factor) scales each seed's step size; a method that
`needs_version_lag` (A-3PO) gets the realised lag of each group.

**Delay regularity** (`drift_max_lag > 0`): the learner keeps its last `drift_max_lag`
parameters and, at every step `n`, the drifts `D_n(t) = ||theta_n - theta_(n-t)||^2`; for every
consumed group of lag `t` it adds its own seed's `D_n(t)` and the mean `D_n(t)` of the *other*
seeds at the same step (the unconditional expectation at step `n`, estimated across the
independent seeds), and for every step the seed's `D_n(t)` for each `t <= n` (the time
average). `drift_summary()` returns these sums and counts per seed.

Shapes: `S` seeds, `B` groups of `G` responses, `T` maximum length, `P` parameters,
`N` enumerated responses, `K` prompts, `n_x` responses per prompt, `Z` policy states, `V` vocab,
`H = drift_max_lag`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gmc_grpo import advantages as adv_lib
from gmc_grpo.losses import gradient_weights, minibatch_diagnostics
from gmc_grpo.lr_schedule import cosine_lr, warmup_steps_for
from gmc_grpo.methods import get_method
from gmc_grpo.seeding import SEEDING, check_seeding, stream_seed, torch_generator
from gmc_grpo.staleness import (
    Schedule,
    ScheduleContext,
    ScheduledBatch,
    ScheduleSettings,
    get_schedule,
    make_schedule,
)
from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import LogLinearSoftmax, Policy, TabularSoftmax, make_policy
from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.tree import ExactState, PrefixTree, batched_logits, exact_state

# entries of the drift record's distance buffer (a few MB, reused within a step)
_DRIFT_CHUNK_ENTRIES = 1 << 21

# the keys of one schedule item (a batch of `k` groups: `k = B` for the batch schedules, 1 for
# the worker schedule), each with a leading `[k]` dimension
ITEM_KEYS = (
    "prompts",  # [k] long
    "responses",  # [k, G] global response indices
    "behavior_token_logprobs",  # [k, G, T] log mu(y_t | s_t) at the group's launch version
    "behavior_prompt_logprobs",  # [k, n_x] log mu(y | x) of every response of the prompt
    "lengths",  # [k, G] response lengths in tokens
)


def generator_seed(run_seed: int, seed: int) -> int:
    """The seed of learner seed `seed`'s sampling generator: stream `toy_learner` of
    `gmc_grpo.seeding` at path `(seed,)` under `run_seed` (independent of every other stream)."""
    return stream_seed(run_seed, "toy_learner", seed)


def schedule_seed(run_seed: int, seed: int) -> int:
    """The seed of learner seed `seed`'s worker-schedule generator (its random durations):
    stream `toy_schedule` at `(seed,)`. It does not depend on the method, so methods run on one
    seed see the same durations."""
    return stream_seed(run_seed, "toy_schedule", seed)


def lr_at(config: ToyTrainConfig, step: int) -> float:
    """Scheduled step size at update `step` (0-based): the core warm-up + cosine (B.1), or the
    constant peak."""
    if config.lr_schedule == "constant":
        return config.lr
    return cosine_lr(
        step,
        peak_lr=config.lr,
        total_steps=config.total_steps,
        warmup_steps=warmup_steps_for(config.total_steps, config.warmup_ratio),
        min_lr=config.lr * config.min_lr_ratio,
    )


# ----------------------------------------------------------------------------------------------
# Exact, seed-batched per-token scores
# ----------------------------------------------------------------------------------------------


def batched_logit_gradient(
    log_table: Tensor, states: Tensor, tokens: Tensor, psi: Tensor, probs: Tensor | None = None
) -> Tensor:
    """`sum_t psi_t grad_z log pi(y_t | s_t)` per seed, w.r.t. each seed's logits table.

    Args:
        log_table: `[S, Z, V]` log-policies.
        states, tokens: `[S, n]` long (padding must carry `psi = 0`).
        psi: `[S, n]` weights.
        probs: `log_table.exp()` if already computed.
    Returns:
        `[S, Z, V]`: scatter-add of `psi` into `(s_t, y_t)` minus `(row mass) * pi(. | s)`.
    """
    S, Z, V = log_table.shape
    row = (torch.arange(S).unsqueeze(1) * Z + states).reshape(-1)
    flat = psi.reshape(-1).to(log_table.dtype)
    hit = torch.zeros(S * Z * V, dtype=log_table.dtype)
    hit.index_add_(0, row * V + tokens.reshape(-1), flat)
    mass = torch.zeros(S * Z, dtype=log_table.dtype)
    mass.index_add_(0, row, flat)
    probs = log_table.exp() if probs is None else probs
    return hit.view(S, Z, V).addcmul_(mass.view(S, Z, 1), probs, value=-1.0)


def score_kernel(policy: Policy, states: Tensor) -> Tensor:
    """`h(s_t) . h(s_t')` for the tokens of each trajectory: `[..., T] -> [..., T, T]`."""
    if isinstance(policy, TabularSoftmax):
        return (states.unsqueeze(-1) == states.unsqueeze(-2)).to(torch.float64)
    if isinstance(policy, LogLinearSoftmax):
        h = policy.features[states]  # [..., T, F]
        return h @ h.transpose(-1, -2)
    raise ValueError(f"no exact score-norm kernel for policy class {type(policy).__name__}")


def trajectory_score_norm_sq(
    policy: Policy, log_table: Tensor, states: Tensor, tokens: Tensor, mask: Tensor
) -> Tensor:
    """Exact `||grad_theta log pi(y_i | x)||^2` per trajectory (VCPO's baseline weights).

    `sum_{t,t'} (e_t . e_t') (h(s_t) . h(s_t'))` with `e_t = onehot(y_t) - pi(. | s_t)`.
    Args: log_table `[S, Z, V]`; states, tokens, mask `[S, B, G, T]`. Returns `[S, B, G]`.
    """
    S = log_table.shape[0]
    seed_idx = torch.arange(S).view(S, 1, 1, 1)
    probs = log_table.exp()[seed_idx, states]  # [S, B, G, T, V]
    onehot = torch.nn.functional.one_hot(tokens, log_table.shape[-1]).to(probs.dtype)
    e = (onehot - probs) * mask.unsqueeze(-1)
    gram = e @ e.transpose(-1, -2)  # [S, B, G, T, T]
    return (gram * score_kernel(policy, states).to(gram.dtype)).sum(dim=(-1, -2))


def effective_sample_sizes(log_ratio: Tensor) -> Tensor:
    """`[S, ...] -> [S]`: `gmc_grpo.logratio.effective_sample_size` of each seed's batch.

    `(sum rho)^2 / (N sum rho^2)` over all of a seed's trajectories, in log space (VCPO).
    """
    flat = log_ratio.detach().flatten(1).double()
    log_ess = 2 * torch.logsumexp(flat, 1) - math.log(flat.shape[1]) - torch.logsumexp(2 * flat, 1)
    return log_ess.exp().to(log_ratio.dtype)


# ----------------------------------------------------------------------------------------------
# Drawing groups from the seeds' current policies
# ----------------------------------------------------------------------------------------------


@dataclass
class _Pending:
    """Draws made at launch, turned into responses later (`GroupSampler.resolve`)."""

    seed_index: int
    item: dict[str, Tensor]
    prompts: Tensor  # [1, k], as drawn
    uniforms: Tensor  # [1, k, G]


@dataclass
class GroupSampler:
    """Draws groups from every seed's current policy at one learner step (exact inverse CDF).

    Each launch draws its prompts and uniforms from its seed's generator at once, in the order
    `toy_mdps.statistics.sample_groups` does (`randint` then `rand`), and returns an empty item
    dict; `resolve()` fills every pending item at once (one `searchsorted` over the seeds'
    concatenated response CDFs, then gathers). `lengths(item)` gives a pending item's response
    lengths on the spot (a schedule that reads them at launch). The result equals
    `sample_groups` seed by seed.
    """

    mdp: TokenMDP
    exact: ExactState
    group_size: int
    pending: dict[int, _Pending] = field(default_factory=dict)  # id(item) -> its draws
    _flat_cdf: Tensor | None = None

    def flat_cdf(self) -> Tensor:
        """`[S, K n_x]`: per seed the prompts' response CDFs, prompt `x` shifted by `x`."""
        if self._flat_cdf is None:
            K = self.mdp.num_prompts
            probs = self.exact.response_logprobs.exp()  # [S, K, n_x]
            cdf = probs.cumsum(dim=2)
            cdf = cdf / cdf[:, :, -1:]
            cdf[:, :, -1] = 1.0
            offset = torch.arange(K, dtype=cdf.dtype).view(1, K, 1)
            self._flat_cdf = (cdf + offset).reshape(cdf.shape[0], -1)
        return self._flat_cdf

    def launch(self, seed_index: int, groups: int, generator: torch.Generator) -> dict[str, Tensor]:
        """Draw `groups` groups for seed `seed_index`; returns the (pending) item dict."""
        K = self.mdp.num_prompts
        prompts = torch.randint(0, K, (1, groups), generator=generator)
        uniforms = torch.rand(
            (1, groups, self.group_size), generator=generator, dtype=torch.float64
        )
        item: dict[str, Tensor] = {}
        self.pending[id(item)] = _Pending(seed_index, item, prompts, uniforms)
        return item

    def _responses(self, flat: Tensor, prompts: Tensor, uniforms: Tensor) -> Tensor:
        """`[R, k, G]` response indices: as `sample_groups`, `searchsorted(cdf, prompt + u)`."""
        query = prompts.unsqueeze(-1).to(torch.float64) + uniforms  # [R, k, G]
        idx = torch.searchsorted(flat, query.reshape(flat.shape[0], -1), right=True)
        n_x = self.mdp.responses_per_prompt
        return torch.minimum(idx.view_as(query), (prompts.unsqueeze(-1) + 1) * n_x - 1)

    def lengths(self, item: dict[str, Tensor]) -> Tensor:
        """`[k, G]` response lengths of an item, pending or filled."""
        if "lengths" in item:
            return item["lengths"]
        entry = self.pending[id(item)]
        s = entry.seed_index
        flat = self.flat_cdf()[s : s + 1]
        responses = self._responses(flat, entry.prompts, entry.uniforms)
        return self.mdp.response_length[responses[0]]

    def resolve(self) -> None:
        """Fill every pending item (one batched draw for all seeds)."""
        if self.pending:
            self._fill(list(self.pending.values()))
            self.pending = {}

    def _fill(self, entries: list[_Pending]) -> None:
        mdp, exact = self.mdp, self.exact
        flat = self.flat_cdf()
        seeds = sorted({e.seed_index for e in entries})
        per_seed: dict[int, list[_Pending]] = {s: [] for s in seeds}
        for entry in entries:
            per_seed[entry.seed_index].append(entry)
        counts = {s: sum(e.prompts.numel() for e in per_seed[s]) for s in seeds}
        width = max(counts.values())
        single = all(len(per_seed[s]) == 1 and counts[s] == width for s in seeds)
        if single:  # one item per seed, all of one size (the batch schedules)
            prompts = torch.cat([per_seed[s][0].prompts for s in seeds])
            uniforms = torch.cat([per_seed[s][0].uniforms for s in seeds])
        else:  # padded to the widest seed; the padding's draws are discarded
            prompts = torch.zeros(len(seeds), width, dtype=torch.long)
            uniforms = torch.zeros(len(seeds), width, self.group_size, dtype=torch.float64)
            for row, s in enumerate(seeds):
                prompts[row, : counts[s]] = torch.cat([e.prompts[0] for e in per_seed[s]])
                uniforms[row, : counts[s]] = torch.cat([e.uniforms[0] for e in per_seed[s]])
        seed_rows = torch.tensor(seeds)
        if len(seeds) < flat.shape[0]:
            flat = flat.index_select(0, seed_rows)
        responses = self._responses(flat, prompts, uniforms)
        states, tokens = mdp.response_states[responses], mdp.response_tokens[responses]
        mask = mdp.response_mask[responses]
        token_lp = exact.log_table[seed_rows.view(-1, 1, 1, 1), states, tokens]
        token_lp = torch.where(mask, token_lp, torch.zeros((), dtype=token_lp.dtype))
        prompt_lp = exact.response_logprobs[seed_rows.view(-1, 1), prompts]  # [R, width, n_x]
        values = {
            "prompts": prompts,
            "responses": responses,
            "behavior_token_logprobs": token_lp,
            "behavior_prompt_logprobs": prompt_lp,
            "lengths": mdp.response_length[responses],
        }
        if single:
            rows_of = {key: value.unbind(0) for key, value in values.items()}
            for row, s in enumerate(seeds):
                item = per_seed[s][0].item
                for key in values:
                    item[key] = rows_of[key][row]
            return
        for row, s in enumerate(seeds):
            start = 0
            for entry in per_seed[s]:
                stop = start + entry.prompts.numel()
                for key, value in values.items():
                    entry.item[key] = value[row, start:stop]
                start = stop


# ----------------------------------------------------------------------------------------------
# The learner
# ----------------------------------------------------------------------------------------------


class AsyncLearner:
    """`S` asynchronous learners of one `ToyTrainConfig`, stepped together.

    Attributes:
        theta: `[S, *param]` current parameters (float64).
        step: learner updates done (the current version `n`).
        adam_m, adam_v: `[S, *param]` Adam moments; schedules, generators, method_states
            (the state of the method's gradient edit): per seed.
        last: the last step's batch-level tensors (diagnostics and tests): `responses` and
            `log_ratio` `[S, B, G]`, `lag` `[S, B]` (each group's own lag), `raw_direction` /
            `direction`
            `[S, P]` (before / after GAC, before clipping), `step_scale` `[S]` (VCPO's factor,
            1 otherwise).
    """

    def __init__(self, config: ToyTrainConfig) -> None:
        self.config = config
        self.mdp = config.make_mdp()
        self.policy = make_policy(self.mdp, config.policy)
        theta0 = self.policy.random_parameters(
            stream_seed(config.init_seed, "toy_init"), config.init_scale
        )
        S = len(config.seeds)
        self.theta = theta0.unsqueeze(0).repeat(S, *([1] * theta0.dim())).contiguous()
        self.step = 0
        self.adam_m = torch.zeros_like(self.theta)
        self.adam_v = torch.zeros_like(self.theta)
        self.generators = [torch_generator(config.run_seed, "toy_learner", s) for s in config.seeds]
        self._sampler: GroupSampler | None = None
        spec = get_schedule(config.schedule)
        self.schedules: list[Schedule[dict[str, Tensor]]] = [
            make_schedule(ScheduleSettings.of(config), self._schedule_context(spec.item, s))
            for s in config.seeds
        ]
        # groups per schedule item: whole batches, or one group per worker launch
        self.groups_per_item = self.schedules[0].groups_per_item(config.num_groups)
        # the groups of one batch carry their own lags (rows record the batch's spread)
        self.mixes_lags = spec.mixes_lags
        self.spec = get_method(config.method)
        self.settings = config.method_settings()
        edit = self.spec.gradient_edit
        # the gradient edit's state, one per seed (GAC: the previous raw gradient)
        self.method_states = [edit.init_state() if edit else None for _ in config.seeds]
        self._exact: ExactState | None = None
        self.tree = PrefixTree.build(self.mdp)
        # The last step's batch-level tensors, for diagnostics and tests: `log_ratio` `[S, B, G]`,
        # `raw_direction` / `direction` `[S, P]` (before / after GAC, before clipping),
        # `step_scale` `[S]` (VCPO's factor, 1 otherwise), `lag` `[S, B]` (each group's realised lag).
        self.last: dict[str, Tensor] = {}
        self.drift: dict[str, Tensor] = {}
        if config.drift_max_lag > 0:
            H, P = config.drift_max_lag, self.theta[0].numel()
            self.drift = {
                "history": torch.zeros(H, S, P, dtype=self.theta.dtype),  # slot n % H
                "groups": torch.zeros(S, H + 1, dtype=torch.float64),
                "own_sum": torch.zeros(S, H + 1, dtype=torch.float64),
                "others_sum": torch.zeros(S, H + 1, dtype=torch.float64),
                "time_sum": torch.zeros(S, H + 1, dtype=torch.float64),
                "time_count": torch.zeros(H + 1, dtype=torch.float64),
                "beyond": torch.zeros(S, dtype=torch.float64),  # groups with lag > H
                # every consumed group: count, sums of lag, length, lag^2, length^2, lag x length
                "coupling": torch.zeros(S, 6, dtype=torch.float64),
            }

    # -- schedules ------------------------------------------------------------------------------
    def _schedule_context(self, item: str, seed: int) -> ScheduleContext:
        """What seed `seed`'s schedule gets besides the config: `B`, the length of an item (its
        mean response length in tokens) and the schedule's own seed."""
        config = self.config
        return ScheduleContext(
            groups_per_batch=config.num_groups,
            length_of=self._length_of,
            length_unit=f"tokens (mean response length of the {item})",
            seed=schedule_seed(config.run_seed, seed),
        )

    def _length_of(self, item: dict[str, Tensor]) -> float:
        """`L` of an item for the length-dependent schedules: its mean response length in tokens
        (the batch's for the length-coupled schedule, B.1; the group's for length-proportional
        worker times)."""
        if self._sampler is None:
            raise RuntimeError("lengths are read at launch, inside train_step")
        return float(self._sampler.lengths(item).double().mean())

    # -- one step -------------------------------------------------------------------------------
    def current_exact(self) -> ExactState:
        if self._exact is None:
            self._exact = exact_state(self.mdp, self.policy, self.theta, self.tree)
        return self._exact

    def _consume(self, exact: ExactState) -> tuple[dict[str, Tensor], Tensor]:
        """Every seed's `B` groups at version `n`: `({key: [S, B, ...]}, lags [S, B])`."""
        cfg, n, k = self.config, self.step, self.groups_per_item
        sampler = GroupSampler(self.mdp, exact, cfg.group_size)
        self._sampler = sampler
        consumed: list[list[ScheduledBatch[dict[str, Tensor]]]] = []
        try:
            for s, schedule in enumerate(self.schedules):
                gen = self.generators[s]
                launch = lambda _version, s=s, gen=gen: sampler.launch(s, k, gen)  # noqa: E731
                consumed.append(schedule.next(n, launch))
            sampler.resolve()
        finally:
            self._sampler = None
        S, B = len(consumed), cfg.num_groups
        items = [entry.batch for entries in consumed for entry in entries]
        batch = {
            key: torch.cat([item[key] for item in items]).view(S, B, *items[0][key].shape[1:])
            for key in ITEM_KEYS
        }
        lags = torch.tensor([e.lag for entries in consumed for e in entries], dtype=torch.float64)
        if k > 1:
            lags = lags.repeat_interleave(k)
        return batch, lags.view(S, B)

    def train_step(self) -> list[dict[str, Any]]:
        """One update of every seed; returns one metrics row per seed (metrics at `theta_n`)."""
        cfg, n = self.config, self.step
        exact = self.current_exact()
        batch, lag = self._consume(exact)  # lag: [S, B], each group's own
        tensors = self._batch_tensors(exact, batch)
        log_ratio = tensors["log_ratio"]
        spec = self.spec
        advantages = self._advantages(exact, tensors)
        version_lag = lag.unsqueeze(-1).expand_as(log_ratio) if spec.needs_version_lag else None
        loss = spec.loss_config(self.settings, max_length=cfg.max_length)
        lp, lb, mask = tensors["logprobs"], tensors["behavior_logprobs"], tensors["mask"]
        psi = gradient_weights(loss, lp, lb, advantages.to(lp.dtype), mask, version_lag=version_lag)
        raw_direction = self._ascent_direction(exact, tensors, psi)
        direction, extra = self._edit_direction(raw_direction)
        scale = self._step_scales(log_ratio)
        self.last = {
            "responses": tensors["responses"],
            "log_ratio": log_ratio,
            "lag": lag,
            "raw_direction": raw_direction,
            "direction": direction,
            "step_scale": scale,
        }
        if self.drift:
            self._record_drift(lag, batch["lengths"].double().mean(dim=-1))
        grad_norm = torch.linalg.vector_norm(direction, dim=1)  # [S]
        if cfg.grad_clip is not None:
            factor = (cfg.grad_clip / grad_norm.clamp(min=1e-300)).clamp(max=1.0)
            direction = direction * factor.unsqueeze(1)
        lr = lr_at(cfg, n) * scale  # [S]
        self._apply(direction, lr)
        diag = minibatch_diagnostics(loss, log_ratio, psi, advantages, mask)
        columns = self._columns(exact, batch, lag, tensors, diag)
        columns.update({"optim/lr": lr.tolist(), "optim/grad_norm": grad_norm.tolist()})
        columns.update(self._lag_columns(lag))
        columns.update(extra)
        return [
            {"step": n, "seed": seed, **{key: values[s] for key, values in columns.items()}}
            for s, seed in enumerate(cfg.seeds)
        ]

    def _batch_tensors(self, exact: ExactState, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The consumed responses' tokens and log-probs at `theta_n` and at their behavior
        snapshots: `responses`, `rewards`, `log_ratio` `[S, B, G]`; `states`, `tokens`, `mask`,
        `logprobs`, `behavior_logprobs` `[S, B, G, T]`."""
        mdp, S = self.mdp, len(self.config.seeds)
        responses = batch["responses"]  # [S, B, G]
        states = mdp.response_states[responses]  # [S, B, G, T]
        tokens = mdp.response_tokens[responses]
        mask = mdp.response_mask[responses]
        seed_idx = torch.arange(S).view(S, 1, 1, 1)
        lp = exact.log_table[seed_idx, states, tokens]
        lp = torch.where(mask, lp, torch.zeros_like(lp))
        lb = batch["behavior_token_logprobs"]  # each group's own snapshot
        return {
            "responses": responses,
            "states": states,
            "tokens": tokens,
            "mask": mask,
            "logprobs": lp,
            "behavior_logprobs": lb,
            "rewards": mdp.rewards[responses],  # [S, B, G]
            "log_ratio": (lp - lb).sum(dim=-1),  # [S, B, G]
        }

    def _advantages(self, exact: ExactState, tensors: dict[str, Tensor]) -> Tensor:
        """`[S, B, G]`: the method's baseline hook (with exact score norms when it needs them),
        or the advantage kind of `config.advantage`."""

        def scores(needs_score_norms: bool) -> tuple[Tensor, Tensor | None]:
            norms = None
            if needs_score_norms:
                norms = trajectory_score_norm_sq(
                    self.policy,
                    exact.log_table,
                    tensors["states"],
                    tensors["tokens"],
                    tensors["mask"],
                )
            return tensors["log_ratio"], norms

        return adv_lib.method_advantages(
            self.spec, self.config.advantage, tensors["rewards"], self.settings, scores
        )

    def _ascent_direction(
        self, exact: ExactState, tensors: dict[str, Tensor], psi: Tensor
    ) -> Tensor:
        """`g = sum psi grad log pi(y_t | s_t)` per seed, `[S, P]` (exact per-token scores)."""
        states, S = tensors["states"], len(self.config.seeds)
        flat = states.numel() // S
        logit_grad = batched_logit_gradient(
            exact.log_table,
            states.reshape(S, flat),
            tensors["tokens"].reshape(S, flat),
            psi.reshape(S, flat),
            exact.probs,
        )
        return self.policy.pullback(logit_grad).reshape(S, -1)  # [S, P]

    def _edit_direction(self, direction: Tensor) -> tuple[Tensor, dict[str, list[float]]]:
        """The method's gradient edit (GAC's projection) on each seed's direction, with the
        edit's metrics per seed; the direction unchanged without one."""
        edit = self.spec.gradient_edit
        if edit is None:
            return direction, {}
        rows, infos = [], []
        for s, state in enumerate(self.method_states):
            projected, info = edit.apply(direction[s], state, self.settings)
            rows.append(projected)
            infos.append(info)
        return torch.stack(rows), {key: [info[key] for info in infos] for key in infos[0]}

    def _step_scales(self, log_ratio: Tensor) -> Tensor:
        """`[S]` factors on the step size (VCPO's ESS factor; 1 without a step-scale hook)."""
        S, hook = len(self.config.seeds), self.spec.step_scale
        if hook is None:
            return torch.ones(S, dtype=torch.float64)
        return torch.tensor(
            [hook.compute(log_ratio[s], self.settings) for s in range(S)], dtype=torch.float64
        )

    def _columns(
        self,
        exact: ExactState,
        batch: dict[str, Tensor],
        lag: Tensor,
        tensors: dict[str, Tensor],
        diag: dict[str, Tensor],
    ) -> dict[str, list[Any]]:
        """Diagnostics of the consumed batch (at `theta_n`), one list per metric (one value per
        seed)."""
        S = len(self.config.seeds)
        log_ratio, rewards = tensors["log_ratio"], tensors["rewards"]
        prompts = batch["prompts"]  # [S, B]
        cur = exact.response_logprobs[torch.arange(S).view(S, 1), prompts]  # [S, B, n_x]
        beh = batch["behavior_prompt_logprobs"]
        kl = (cur.exp() * (cur - beh)).sum(dim=-1).clamp(min=0.0).mean(dim=-1)  # [S]
        columns: dict[str, list[Any]] = {
            "policy/objective": exact.objective.tolist(),
            "policy/grad_norm_sq": exact.grad_norm_sq.tolist(),
            "policy/entropy": exact.entropy.tolist(),
            "staleness/lag": lag.mean(dim=1).tolist(),
            "ratio/kl_exact": kl.tolist(),
            "ratio/removed_mass": _finite_or_none(diag["removed_mass"]),
            "ratio/capped_frac": _finite_or_none(diag["capped_frac"]),
            "ratio/clipped_token_frac": _finite_or_none(diag["clipped_token_frac"]),
            "ratio/ess": effective_sample_sizes(log_ratio).tolist(),
            "ratio/log_max": log_ratio.reshape(S, -1).max(dim=1).values.tolist(),
            "reward/mean": rewards.reshape(S, -1).mean(dim=1).tolist(),
            "response/length_mean": batch["lengths"].double().reshape(S, -1).mean(dim=1).tolist(),
        }
        return columns

    def _lag_columns(self, lag: Tensor) -> dict[str, list[float]]:
        """When the groups of a batch carry their own lags (`[S, B]`): the batch's spread and its
        `tau4` term per seed; nothing when a batch shares one lag."""
        if not self.mixes_lags:
            return {}
        return {
            "staleness/lag_max": lag.max(dim=1).values.tolist(),
            "staleness/lag_min": lag.min(dim=1).values.tolist(),
            "staleness/lag4_mean": lag.pow(4).mean(dim=1).tolist(),
        }

    def _record_drift(self, lag: Tensor, length: Tensor) -> None:
        """Accumulate both sides of the delay-regularity condition at step `n` (module doc), and
        the moments of (lag, mean response length) over the consumed groups (`[S, B]` each)."""
        drift, n = self.drift, self.step
        moments = (torch.ones_like(lag), lag, length, lag * lag, length * length, lag * length)
        drift["coupling"] += torch.stack([m.sum(dim=1) for m in moments], dim=1)
        history = drift["history"]
        H, S = history.shape[0], history.shape[1]
        theta = self.theta.reshape(S, -1)
        reach = min(n, H)
        if reach > 0:
            # slot h holds theta_m for the latest m < n with m = h (mod H): t = (n - h) mod H.
            # Distances slot by slot in chunks into one buffer (no gather, no [H, S, P] temp).
            filled = H if n >= H else n  # slots 0..n-1 until the history is full
            by_slot = torch.empty(filled, S, dtype=theta.dtype)
            chunk = max(1, min(filled, _DRIFT_CHUNK_ENTRIES // max(theta.numel(), 1)))
            buffer = torch.empty(chunk, S, theta.shape[1], dtype=theta.dtype)
            for start in range(0, filled, chunk):
                stop = min(filled, start + chunk)
                part = buffer[: stop - start]
                torch.sub(history[start:stop], theta, out=part)
                by_slot[start:stop] = part.square_().sum(dim=-1)
            slots = torch.tensor([(n - t) % H for t in range(1, reach + 1)])
            dist = by_slot.index_select(0, slots).T  # [S, reach], t = 1..reach
            drift["time_sum"][:, 1 : reach + 1] += dist
            drift["time_count"][1 : reach + 1] += 1
            others = (dist.sum(dim=0, keepdim=True) - dist) / max(S - 1, 1)
            if S == 1:
                others = torch.full_like(dist, math.nan)
            t = lag.long()  # [S, B]
            inside = (t >= 1) & (t <= reach)
            column = (t.clamp(1, reach) - 1) * inside  # [S, B] index into dist
            ones = inside.to(torch.float64)
            drift["groups"][:, 1 : reach + 1].scatter_add_(1, column, ones)
            drift["own_sum"][:, 1 : reach + 1].scatter_add_(
                1, column, dist.gather(1, column) * ones
            )
            drift["others_sum"][:, 1 : reach + 1].scatter_add_(
                1, column, torch.where(inside, others.gather(1, column), 0.0)
            )
        drift["beyond"] += (lag > H).sum(dim=1).to(torch.float64)
        history[n % H] = theta

    def drift_summary(self) -> dict[str, Any]:
        """Per seed, for lags `t = 0..H`: groups of lag `t`, the sums of their own `D_n(t)` and of
        the other seeds' mean `D_n(t)`, and the time sums and counts of `D_n(t)` (module doc);
        and `corr_lag_length`, the correlation over the seed's groups of lag and mean response
        length (the coupling a length-proportional generation time creates)."""
        if not self.drift:
            return {}
        d = self.drift
        return {
            "max_lag": self.config.drift_max_lag,
            "time_count": d["time_count"].tolist(),
            "per_seed": {
                str(seed): {
                    "groups": d["groups"][s].tolist(),
                    "own_sum": d["own_sum"][s].tolist(),
                    "others_sum": d["others_sum"][s].tolist(),
                    "time_sum": d["time_sum"][s].tolist(),
                    "beyond_max_lag": float(d["beyond"][s]),
                    "corr_lag_length": _correlation(d["coupling"][s]),
                }
                for s, seed in enumerate(self.config.seeds)
            },
        }

    def _apply(self, direction: Tensor, lr: Tensor) -> None:
        """Ascent step with `direction` `[S, P]` and per-seed step sizes `lr` `[S]`."""
        cfg = self.config
        d = direction.view_as(self.theta)
        lr_b = lr.view(-1, *([1] * (self.theta.dim() - 1)))
        if cfg.optimizer == "sgd":
            self.theta = self.theta + lr_b * d
        else:
            t = self.step + 1
            beta1, beta2 = cfg.betas
            self.adam_m.mul_(beta1).add_(d, alpha=1 - beta1)
            self.adam_v.mul_(beta2).addcmul_(d, d, value=1 - beta2)
            # theta + lr * m_hat / (sqrt(v_hat) + eps), operation by operation in place
            update = torch.div(self.adam_m, 1 - beta1**t).mul_(lr_b)
            denominator = torch.div(self.adam_v, 1 - beta2**t).sqrt_().add_(cfg.adam_eps)
            self.theta = self.theta + update.div_(denominator)
        self.step += 1
        self._exact = None

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit for bit: parameters, optimizer, schedules (their
        queued groups with their own tensors), RNG, the method's state and the drift record."""
        return {
            "config": self.config.to_dict(),
            "seeding": SEEDING,
            "step": self.step,
            "theta": self.theta.clone(),
            "adam_m": self.adam_m.clone(),
            "adam_v": self.adam_v.clone(),
            "generators": [g.get_state() for g in self.generators],
            "schedules": [_own_tensors(s.state_dict()) for s in self.schedules],
            "method_states": [m.state_dict() if m else None for m in self.method_states],
            "drift": {k: v.clone() for k, v in self.drift.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_seeding(state.get("seeding"), "the learner state", what="checkpoint")
        if state["config"] != self.config.to_dict():
            raise ValueError("checkpoint was written by a different ToyTrainConfig")
        self.step = int(state["step"])
        self.theta = state["theta"].clone()
        self.adam_m = state["adam_m"].clone()
        self.adam_v = state["adam_v"].clone()
        for gen, gstate in zip(self.generators, state["generators"], strict=True):
            gen.set_state(gstate)
        for sched, sstate in zip(self.schedules, state["schedules"], strict=True):
            sched.load_state_dict(_own_tensors(sstate))
        for mine, saved in zip(self.method_states, state["method_states"], strict=True):
            if mine is not None:
                mine.load_state_dict(saved)
        self.drift = {k: v.clone() for k, v in state.get("drift", {}).items()}
        self._exact = None


def _own_tensors(value: Any) -> Any:
    """`value` with every tensor replaced by a contiguous copy of its own (the items of a step
    are views of one tensor for all seeds; a checkpoint stores each with its own storage)."""
    if isinstance(value, Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {k: _own_tensors(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_own_tensors(v) for v in value]
    return value


def _correlation(moments: Tensor) -> float | None:
    """Pearson correlation from `[count, sum x, sum y, sum x^2, sum y^2, sum x y]` (None when a
    variance is 0, e.g. constant lags)."""
    n, sx, sy, sxx, syy, sxy = moments.tolist()
    vx, vy = sxx - sx * sx / n, syy - sy * sy / n
    if not (vx > 1e-12 * max(sxx, 1.0) and vy > 1e-12 * max(syy, 1.0)):
        return None
    return (sxy - sx * sy / n) / math.sqrt(vx * vy)


def _finite_or_none(values: Tensor) -> list[float | None]:
    return [x if math.isfinite(x) else None for x in values.tolist()]


__all__ = [
    "AsyncLearner",
    "ExactState",
    "GroupSampler",
    "PrefixTree",
    "batched_logit_gradient",
    "batched_logits",
    "effective_sample_sizes",
    "exact_state",
    "generator_seed",
    "lr_at",
    "schedule_seed",
    "trajectory_score_norm_sq",
]
