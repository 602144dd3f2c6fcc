"""Asynchronous learners on the token MDPs, vectorised over a leading seed dimension.

`AsyncLearner` runs `S` independent learners at once (one per seed, `TrainConfig.seeds`). Every
learner step:

1. computes the exact quantities of the current policies `theta_n` `[S, P]` by enumeration
   (`J`, `grad J`, token entropy: an `index_select` and `index_add_` over the response tokens
   of all seeds at once, `TokenIndex`);
2. asks each seed's staleness schedule (`gmc_grpo.staleness`) for the batch it consumes; new
   batches are sampled from the current policy of that seed with that seed's generator;
3. computes the method's per-token gradient weights `psi` `[S, B, G, T]` with the core library
   (`gmc_grpo.estimators.token_gradient_weights`) and turns them into the update direction
   `g = sum psi grad log pi(y_t | s_t)` with the exact per-token softmax scores (no autograd);
4. applies the method's hooks from its registry spec (`gmc_grpo.methods`: VCPO's ESS step size,
   GAC's projection), clips `g` per seed and takes an ascent step (SGD or Adam, elementwise and
   so independent per seed) with the warm-up + cosine schedule (`gmc_grpo.schedules`).

**Seeds and schedules (design).** Each seed owns its own `torch.Generator` (seeded from the run
seed and the seed value) and its own schedule object whose batches hold that seed's samples.
For the fixed-delay schedule the lags are the same for every seed; for the length-coupled one
they depend on the sampled lengths and so differ per seed, which is why the schedules are kept
per seed. Only the schedules' bookkeeping and the inverse-CDF sampling loop over seeds (a few
small tensors per seed); every tensor computation (log-probs, advantages, `psi`, gradients,
exact metrics, optimizer) is one batched operation over `[S, ...]`. Seed `s`'s trajectory is
identical whether it runs alone or together with other seeds (a test checks it), so the
vectorised run is a pure speed-up (`bench/bench_toy_seeds.py` measures how much).

**Initial parameters.** All seeds start from the same `theta_0` (drawn with `init_seed`): the
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

Shapes: `S` seeds, `B` groups of `G` responses, `T` maximum length, `P` parameters,
`N` enumerated responses, `K` prompts, `n_x` responses per prompt, `Z` policy states, `V` vocab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gmc_grpo import advantages as adv_lib
from gmc_grpo.defaults import SEED_STRIDE
from gmc_grpo.logratio import effective_sample_size
from gmc_grpo.losses import gradient_weights, minibatch_diagnostics
from gmc_grpo.methods import get_method
from gmc_grpo.schedules import cosine_lr, warmup_steps_for
from gmc_grpo.staleness import FixedDelaySchedule, LengthCoupledSchedule, ScheduledBatch
from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import LogLinearSoftmax, Policy, TabularSoftmax, make_policy
from toy_mdps.statistics import sample_groups
from toy_mdps.train.config import TrainConfig


def generator_seed(run_seed: int, seed: int) -> int:
    """The seed of seed `seed`'s generator (independent of the other seeds of the run).

    `run_seed` strides by `SEED_STRIDE`; 7,919 (a prime) spreads the seed values within a run,
    17 keeps seed 0 of run 0 off the generator seed 0; `% 2**62` keeps it a valid seed.
    """
    return (run_seed * SEED_STRIDE + seed * 7_919 + 17) % (2**62)


def lr_at(config: TrainConfig, step: int) -> float:
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
# Exact, seed-batched quantities of the softmax policies
# ----------------------------------------------------------------------------------------------


def batched_logits(policy: Policy, theta: Tensor) -> Tensor:
    """`[S, *param] -> [S, Z, V]` logits tables."""
    if isinstance(policy, TabularSoftmax):
        return theta
    if isinstance(policy, LogLinearSoftmax):
        return torch.einsum("sf,nvf->nsv", policy.features, theta)
    return torch.stack([policy.logits(t) for t in theta])


def batched_logit_gradient(
    log_table: Tensor, states: Tensor, tokens: Tensor, psi: Tensor
) -> Tensor:
    """`sum_t psi_t grad_z log pi(y_t | s_t)` per seed, w.r.t. each seed's logits table.

    Args:
        log_table: `[S, Z, V]` log-policies.
        states, tokens: `[S, n]` long (padding must carry `psi = 0`).
        psi: `[S, n]` weights.
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
    return hit.view(S, Z, V).addcmul_(mass.view(S, Z, 1), log_table.exp(), value=-1.0)


@dataclass
class ExactState:
    """Exact quantities of the current policies of all seeds.

    log_table: `[S, Z, V]`; response_logprobs: `[S, K, n_x]` `log pi(y | x)`;
    objective: `[S]` `J`; gradient: `[S, *param]` `grad J`; entropy: `[S]` mean over prompts of
    the per-token entropy (as `toy_mdps.exact.exact_token_entropy`).
    """

    log_table: Tensor
    response_logprobs: Tensor
    objective: Tensor
    gradient: Tensor
    entropy: Tensor


@dataclass(frozen=True)
class TokenIndex:
    """The response tokens of an MDP flattened once (padding dropped), for seed-batched sums.

    table_index: `[M]` `s_t V + y_t` of every response token (into a flattened `[Z V]` table).
    state_index: `[M]` `s_t`.
    response_of_token: `[M]` the response each token belongs to.
    """

    table_index: Tensor
    state_index: Tensor
    response_of_token: Tensor

    @classmethod
    def build(cls, mdp: TokenMDP) -> TokenIndex:
        mask = mdp.response_mask
        states, tokens = mdp.response_states[mask], mdp.response_tokens[mask]
        owner = torch.arange(mdp.num_responses).unsqueeze(1).expand_as(mask)[mask]
        return cls(states * mdp.vocab_size + tokens, states, owner.contiguous())


def exact_state(
    mdp: TokenMDP, policy: Policy, theta: Tensor, index: TokenIndex | None = None
) -> ExactState:
    """Exact `J`, `grad J`, entropy and response log-probs for `[S, *param]` parameters.

    Sums run over the `M` response tokens only (`TokenIndex`): token log-probs are one
    `index_select` from the flattened tables, response sums one `index_add_`, and the logit
    gradient `sum_y pi(y) r(y) / K sum_t (onehot(y_t) - pi(. | s_t))` one `index_add_` of the
    token weights into `[S, Z V]` minus each row's mass times `pi(. | s)`.
    """
    idx = TokenIndex.build(mdp) if index is None else index
    S = theta.shape[0]
    K, N, Z, V = mdp.num_prompts, mdp.num_responses, mdp.num_states, mdp.vocab_size
    log_table = torch.log_softmax(batched_logits(policy, theta), dim=-1)  # [S, Z, V]
    flat = log_table.reshape(S, Z * V)
    tok = flat.index_select(1, idx.table_index)  # [S, M]
    resp = torch.zeros(S, N, dtype=flat.dtype).index_add_(1, idx.response_of_token, tok)
    p = resp.exp()
    objective = (p * mdp.rewards).sum(dim=-1) / K
    weight = (p * mdp.rewards / K).index_select(1, idx.response_of_token)  # [S, M]
    hit = torch.zeros(S, Z * V, dtype=flat.dtype).index_add_(1, idx.table_index, weight)
    hit = hit.view(S, Z, V)
    probs = log_table.exp()
    logit_grad = hit - hit.sum(dim=-1, keepdim=True) * probs
    gradient = policy.pullback(logit_grad)
    state_entropy = -(probs * log_table).sum(dim=-1)  # [S, Z]
    per_token = state_entropy.index_select(1, idx.state_index)
    per_resp = torch.zeros(S, N, dtype=flat.dtype).index_add_(1, idx.response_of_token, per_token)
    ent = (p * per_resp).view(S, K, -1).sum(dim=-1)
    length = (p * mdp.response_length.to(p.dtype)).view(S, K, -1).sum(dim=-1)
    return ExactState(log_table, resp.view(S, K, -1), objective, gradient, (ent / length).mean(1))


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


# ----------------------------------------------------------------------------------------------
# The learner
# ----------------------------------------------------------------------------------------------


class AsyncLearner:
    """`S` asynchronous learners of one `TrainConfig`, stepped together.

    Attributes:
        theta: `[S, *param]` current parameters (float64).
        step: learner updates done (the current version `n`).
        adam_m, adam_v: `[S, *param]` Adam moments; schedules, generators, method_states
            (the state of the method's gradient edit): per seed.
    """

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.mdp = config.make_mdp()
        self.policy = make_policy(self.mdp, config.policy)
        theta0 = self.policy.random_parameters(config.init_seed, config.init_scale)
        S = len(config.seeds)
        self.theta = theta0.unsqueeze(0).repeat(S, *([1] * theta0.dim())).contiguous()
        self.step = 0
        self.adam_m = torch.zeros_like(self.theta)
        self.adam_v = torch.zeros_like(self.theta)
        self.generators = [
            torch.Generator().manual_seed(generator_seed(config.run_seed, s)) for s in config.seeds
        ]
        self.schedules = [self._make_schedule() for _ in config.seeds]
        self.spec = get_method(config.method)
        self.settings = config.method_settings()
        edit = self.spec.gradient_edit
        # the gradient edit's state, one per seed (GAC: the previous raw gradient)
        self.method_states = [edit.init_state() if edit else None for _ in config.seeds]
        self._exact: ExactState | None = None
        self.token_index = TokenIndex.build(self.mdp)
        # The last step's batch-level tensors, for diagnostics and tests: `log_ratio` `[S, B, G]`,
        # `raw_direction` / `direction` `[S, P]` (before / after GAC, before clipping),
        # `step_scale` `[S]` (VCPO's factor, 1 otherwise), `lag` `[S]` (realised lag).
        self.last: dict[str, Tensor] = {}

    # -- schedules ------------------------------------------------------------------------------
    def _make_schedule(self) -> FixedDelaySchedule | LengthCoupledSchedule:
        if self.config.schedule == "fixed_delay":
            return FixedDelaySchedule(self.config.delay)
        if self.config.schedule == "length_coupled":
            return LengthCoupledSchedule(
                _batch_mean_length,
                lam=self.config.lam,
                max_launches=self.config.max_launches,
                length_unit="tokens (mean response length of the batch)",
            )
        raise ValueError(f"the toy learner cannot build schedule {self.config.schedule!r} yet")

    def _generate(self, seed_index: int, exact: ExactState) -> dict[str, Tensor]:
        """A batch of seed `seed_index` from its current policy: `B` groups of `G` responses.

        Holds `prompts` `[B]`, `responses` `[B, G]` (global response indices),
        `behavior_token_logprobs` `[B, G, T]` and `behavior_prompt_logprobs` `[B, n_x]`
        (`log mu(y | x_b)` of every response of the group's prompt, for the exact KL).
        """
        cfg, mdp = self.config, self.mdp
        resp_lp = exact.response_logprobs[seed_index]  # [K, n_x]
        prompts, responses = sample_groups(
            mdp,
            resp_lp.reshape(-1),
            1,
            cfg.num_groups,
            cfg.group_size,
            self.generators[seed_index],
        )
        prompts, responses = prompts[0], responses[0]
        table = exact.log_table[seed_index]
        states, tokens = mdp.response_states[responses], mdp.response_tokens[responses]
        mask = mdp.response_mask[responses]
        token_lp = torch.where(mask, table[states, tokens], torch.zeros((), dtype=table.dtype))
        return {
            "prompts": prompts,
            "responses": responses,
            "behavior_token_logprobs": token_lp,
            "behavior_prompt_logprobs": resp_lp[prompts].clone(),
            "lengths": mdp.response_length[responses],
        }

    # -- one step -------------------------------------------------------------------------------
    def current_exact(self) -> ExactState:
        if self._exact is None:
            self._exact = exact_state(self.mdp, self.policy, self.theta, self.token_index)
        return self._exact

    def train_step(self) -> list[dict[str, Any]]:
        """One update of every seed; returns one metrics row per seed (metrics at `theta_n`)."""
        cfg, mdp = self.config, self.mdp
        S, n = len(cfg.seeds), self.step
        exact = self.current_exact()
        consumed: list[ScheduledBatch[dict[str, Tensor]]] = []
        for s, schedule in enumerate(self.schedules):
            entries = schedule.next(n, lambda _v, s=s: self._generate(s, exact))
            consumed.append(entries[0])
        batch = {k: torch.stack([e.batch[k] for e in consumed]) for k in consumed[0].batch}
        lag = torch.tensor([float(e.lag) for e in consumed], dtype=torch.float64)  # [S]

        responses = batch["responses"]  # [S, B, G]
        states = mdp.response_states[responses]  # [S, B, G, T]
        tokens = mdp.response_tokens[responses]
        mask = mdp.response_mask[responses]
        seed_idx = torch.arange(S).view(S, 1, 1, 1)
        lp = exact.log_table[seed_idx, states, tokens]
        lp = torch.where(mask, lp, torch.zeros_like(lp))
        lb = batch["behavior_token_logprobs"]
        rewards = mdp.rewards[responses]  # [S, B, G]
        log_ratio = (lp - lb).sum(dim=-1)  # [S, B, G]

        spec, settings = self.spec, self.settings
        if spec.uses_baseline(cfg.advantage):
            norms = None
            if spec.baseline.needs_score_norms:  # type: ignore[union-attr]
                norms = trajectory_score_norm_sq(self.policy, exact.log_table, states, tokens, mask)
            advantages = spec.baseline.compute(rewards, log_ratio, norms, settings)  # type: ignore[union-attr]
        else:
            advantages = adv_lib.compute(rewards, spec.advantage_kind(cfg.advantage))  # type: ignore[arg-type]
        version_lag = lag.view(S, 1, 1).expand_as(log_ratio) if spec.needs_version_lag else None
        loss = spec.loss_config(settings, max_length=cfg.max_length)
        psi = gradient_weights(loss, lp, lb, advantages.to(lp.dtype), mask, version_lag=version_lag)
        flat = states.numel() // S
        logit_grad = batched_logit_gradient(
            exact.log_table,
            states.reshape(S, flat),
            tokens.reshape(S, flat),
            psi.reshape(S, flat),
        )
        direction = self.policy.pullback(logit_grad).reshape(S, -1)  # [S, P]

        raw_direction = direction
        extra: dict[str, list[float]] = {}
        if spec.gradient_edit is not None:
            rows, infos = [], []
            for s, state in enumerate(self.method_states):
                projected, info = spec.gradient_edit.apply(direction[s], state, settings)
                rows.append(projected)
                infos.append(info)
            direction = torch.stack(rows)
            extra = {key: [info[key] for info in infos] for key in infos[0]}
        scale = torch.ones(S, dtype=torch.float64)
        if spec.step_scale is not None:
            scale = torch.tensor(
                [spec.step_scale.compute(log_ratio[s], settings) for s in range(S)],
                dtype=torch.float64,
            )
        self.last = {
            "log_ratio": log_ratio,
            "raw_direction": raw_direction,
            "direction": direction,
            "step_scale": scale,
            "lag": lag,
        }
        grad_norm = torch.linalg.vector_norm(direction, dim=1)  # [S]
        if cfg.grad_clip is not None:
            factor = (cfg.grad_clip / grad_norm.clamp(min=1e-300)).clamp(max=1.0)
            direction = direction * factor.unsqueeze(1)
        lr = lr_at(cfg, n) * scale  # [S]
        self._apply(direction, lr)

        # Diagnostics of the consumed batch (at theta_n).
        prompts = batch["prompts"]  # [S, B]
        cur = exact.response_logprobs[torch.arange(S).view(S, 1), prompts]  # [S, B, n_x]
        beh = batch["behavior_prompt_logprobs"]
        kl = (cur.exp() * (cur - beh)).sum(dim=-1).clamp(min=0.0).mean(dim=-1)  # [S]
        diag = minibatch_diagnostics(loss, log_ratio, psi, advantages, mask)
        removed, capped_frac = diag["removed_mass"], diag["capped_frac"]
        clipped = diag["clipped_token_frac"]
        lengths = batch["lengths"].double()
        out = []
        for s, seed in enumerate(cfg.seeds):
            row: dict[str, Any] = {
                "step": n,
                "seed": seed,
                "policy/objective": float(exact.objective[s]),
                "policy/grad_norm_sq": float(exact.gradient[s].pow(2).sum()),
                "policy/entropy": float(exact.entropy[s]),
                "staleness/lag": float(lag[s]),
                "ratio/kl_exact": float(kl[s]),
                "ratio/removed_mass": _finite_or_none(float(removed[s])),
                "ratio/capped_frac": _finite_or_none(float(capped_frac[s])),
                "ratio/clipped_token_frac": _finite_or_none(float(clipped[s])),
                "ratio/ess": float(effective_sample_size(log_ratio[s])),
                "ratio/log_max": float(log_ratio[s].max()),
                "optim/lr": float(lr[s]),
                "optim/grad_norm": float(grad_norm[s]),
                "reward/mean": float(rewards[s].mean()),
                "response/length_mean": float(lengths[s].mean()),
            }
            for key, values in extra.items():
                row[key] = values[s]
            out.append(row)
        return out

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
            m_hat = self.adam_m / (1 - beta1**t)
            v_hat = self.adam_v / (1 - beta2**t)
            self.theta = self.theta + lr_b * m_hat / (v_hat.sqrt() + cfg.adam_eps)
        self.step += 1
        self._exact = None

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit for bit: parameters, optimizer, schedules, RNG and
        the method's state."""
        return {
            "config": self.config.to_dict(),
            "step": self.step,
            "theta": self.theta.clone(),
            "adam_m": self.adam_m.clone(),
            "adam_v": self.adam_v.clone(),
            "generators": [g.get_state() for g in self.generators],
            "schedules": [s.state_dict() for s in self.schedules],
            "method_states": [m.state_dict() if m else None for m in self.method_states],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["config"] != self.config.to_dict():
            raise ValueError("checkpoint was written by a different TrainConfig")
        self.step = int(state["step"])
        self.theta = state["theta"].clone()
        self.adam_m = state["adam_m"].clone()
        self.adam_v = state["adam_v"].clone()
        for gen, gstate in zip(self.generators, state["generators"], strict=True):
            gen.set_state(gstate)
        for sched, sstate in zip(self.schedules, state["schedules"], strict=True):
            sched.load_state_dict(sstate)
        for mine, saved in zip(self.method_states, state["method_states"], strict=True):
            if mine is not None:
                mine.load_state_dict(saved)
        self._exact = None


def _batch_mean_length(batch: dict[str, Tensor]) -> float:
    """`L` of the length-coupled schedule: the batch's mean response length in tokens."""
    return float(batch["lengths"].double().mean())


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


__all__ = [
    "AsyncLearner",
    "ExactState",
    "TokenIndex",
    "batched_logit_gradient",
    "exact_state",
    "generator_seed",
    "lr_at",
    "trajectory_score_norm_sq",
]
