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
4. applies the method's learner hooks (VCPO's ESS step size, GAC's projection,
   `gmc_grpo.hooks`), clips `g` per seed and takes an ascent step (SGD or Adam, elementwise and
   so independent per seed) with the cosine schedule.

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

**Methods.** `is`, `grpo`, `tic`, `gmc`, `vcpo`, `a3po` are the core estimators. `vcpo` adds
its ESS step-size factor (`hooks.vcpo_step_scale`) and its minimum-variance baseline
(`hooks.vcpo_baseline_advantages`) whose per-trajectory `||grad log pi(y_i)||^2` is exact here:
with the per-token logit scores `e_t = onehot(y_t) - pi(. | s_t)` and features `h(s)`,
`||sum_t e_t (x) h(s_t)||^2 = sum_{t,t'} (e_t . e_t') (h(s_t) . h(s_t'))` (tabular: `h` one-hot).
`gac` is OUR INTERPRETATION (no public code): the flattened GRPO estimator of each seed is
projected with `hooks.gac_project` (its state kept per seed). `a3po` gets the realised version
lag of each group.

Shapes: `S` seeds, `B` groups of `G` responses, `T` maximum length, `P` parameters,
`N` enumerated responses, `K` prompts, `n_x` responses per prompt, `Z` policy states, `V` vocab.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from gmc_grpo import advantages as adv_lib
from gmc_grpo import hooks
from gmc_grpo.estimators import (
    METHODS,
    PAPER_CAP_EPS,
    TRAJECTORY_METHODS,
    VCPO_TRUNCATION,
    group_diagnostics,
    token_gradient_weights,
)
from gmc_grpo.logratio import effective_sample_size
from gmc_grpo.losses import PAPER_ADVANTAGE
from gmc_grpo.staleness import FixedDelaySchedule, LengthCoupledSchedule, ScheduledBatch
from toy_mdps.config import (
    check_loss_constants,
    check_mdp_fields,
    dataclass_from_dict,
    read_json_config,
)
from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import LogLinearSoftmax, Policy, TabularSoftmax, make_policy
from toy_mdps.statistics import sample_groups

TRAIN_METHODS: tuple[str, ...] = ("is", "grpo", "tic", "gmc", "vcpo", "gac", "a3po")
SCHEDULES = ("fixed", "length_coupled")
OPTIMIZERS = ("adam", "sgd")
LR_SCHEDULES = ("cosine", "constant")
ADVANTAGES = ("paper", "loo", "centered", "std")
CONFIG_DIR = Path(__file__).resolve().parent / "configs"


@dataclass
class TrainConfig:
    """One asynchronous toy learner, run for every seed in `seeds` at once (`gmc-grpo toy train`).

    MDP (`toy_mdps.mdp.TokenMDP`) and policy:
        num_prompts: `K`, uniform prompts.
        vocab_size: `V` including EOS.
        max_length: `T`, maximum response length and the `T` of the `1/(T B G)` normalisation.
        reward: `"pattern"` (sparse target-substring reward) or `"length"`.
        reward_scale: `R`, the largest reward.
        pattern_length: length of each prompt's target pattern.
        mdp_seed: seed of the target patterns.
        policy: `"tabular"` softmax or `"loglinear"` (shared features).
        init_scale: standard deviation of the random initial parameters.
        init_seed: seed of `theta_0`, shared by every learner seed (see the module docstring).

    Method (`gmc_grpo.estimators`, `gmc_grpo.hooks`):
        method: `is`, `grpo`, `tic`, `gmc`, `vcpo`, `gac`, `a3po`.
        eps: cap `1 + eps` of TIC and GMC (0.28, Appendix B.1).
        clip_low, clip_high: token clip of GRPO, GAC's base GRPO loss and A-3PO (0.2, B.1).
        truncation: VCPO's sequence-level truncation `c` (8, VCPO's code).
        a3po_mask_threshold: A-3PO masks tokens with `pi_prox / mu` above it (5, AReaL).
        advantage: `"paper"` (`gmc_grpo.losses.PAPER_ADVANTAGE`; VCPO: its minimum-variance
            baseline, B.1) or one kind for every method (`loo`, `centered`, `std`; VCPO then
            keeps only its ESS step size and truncation).
        vcpo_rho_ref: VCPO's reference ESS (1, its code).
        gac_low, gac_high: GAC's cosine thresholds (0.05, 0.30, Appendix B.1).

    Batches and staleness (`gmc_grpo.staleness`):
        num_groups: `B` groups per step (8, Appendix B.1).
        group_size: `G` responses per group (8, Appendix B.1).
        schedule: `"fixed"` (FIFO of `delay` batches, B.1) or `"length_coupled"`
            (`tau_ready = tau_launch + lam L`, B.1; `L` = the batch's mean response length in
            tokens, one clock tick per launch).
        delay: `D` of the fixed-delay schedule.
        lam: `lambda` of the length-coupled schedule, in launches per token (paper: 28 with its
            own units; 4 gives a mean lag of about 15 steps on the `K = 4, T = 5` MDP, 8 about 24).
        max_launches: safety cap per warm-up or refill (400, B.1).

    Optimizer (the LLM recipe of Appendix B.1, scaled):
        optimizer: `"adam"` (B.1: AdamW 8-bit, no weight decay) or `"sgd"`.
        learning_rate: peak step size.
        beta1, beta2, adam_eps: Adam constants (0.9, 0.999, B.1; eps 1e-8).
        lr_schedule: `"cosine"` (B.1) or `"constant"`.
        warmup_frac: linear warm-up fraction of `num_steps` (3%, B.1).
        min_lr_ratio: the cosine's final step size relative to the peak.
        grad_clip: per-seed clip of `||g||` (1.0, B.1); `None` disables it.
        num_steps: learner updates `N`.

    Run:
        seeds: independent learners, run at once (leading seed dimension).
        run_seed: mixed with each seed into its generator's seed.
        checkpoint_every: steps between checkpoints (resumption).
        name: run name.
    """

    name: str = "train"
    num_prompts: int = 8
    vocab_size: int = 4
    max_length: int = 6
    reward: str = "pattern"
    reward_scale: float = 1.0
    pattern_length: int = 2
    mdp_seed: int = 0
    policy: str = "tabular"
    init_scale: float = 1.0
    init_seed: int = 0
    method: str = "gmc"
    eps: float = PAPER_CAP_EPS
    clip_low: float = 0.2
    clip_high: float = 0.2
    truncation: float = VCPO_TRUNCATION
    a3po_mask_threshold: float = 5.0
    advantage: str = "paper"
    vcpo_rho_ref: float = 1.0
    gac_low: float = 0.05
    gac_high: float = 0.30
    num_groups: int = 8
    group_size: int = 8
    schedule: str = "fixed"
    delay: int = 0
    lam: float = 4.0
    max_launches: int = 400
    optimizer: str = "adam"
    learning_rate: float = 0.05
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    lr_schedule: str = "cosine"
    warmup_frac: float = 0.03
    min_lr_ratio: float = 0.0
    grad_clip: float | None = 1.0
    num_steps: int = 200
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    run_seed: int = 0
    checkpoint_every: int = 50

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"TrainConfig.{name}={getattr(self, name)!r}: {why}")

        check_mdp_fields(self)
        if self.num_steps < 1:
            raise bad("num_steps", "must be >= 1")
        if self.method not in TRAIN_METHODS:
            raise bad("method", f"must be one of {TRAIN_METHODS}")
        if not (self.eps > 0 and math.isfinite(self.eps)):
            raise bad("eps", "must be finite and > 0")
        check_loss_constants(self)
        if self.advantage not in ADVANTAGES:
            raise bad("advantage", f"must be one of {ADVANTAGES}")
        if not self.vcpo_rho_ref > 0:
            raise bad("vcpo_rho_ref", "must be > 0")
        if not 0 <= self.gac_low < self.gac_high <= 1:
            raise bad("gac_low", f"need 0 <= gac_low < gac_high={self.gac_high} <= 1")
        if self.group_size < 2:
            raise bad("group_size", "must be >= 2 (group advantages)")
        if self.schedule not in SCHEDULES:
            raise bad("schedule", f"must be one of {SCHEDULES}")
        if self.delay < 0:
            raise bad("delay", "must be >= 0")
        if not (self.lam >= 0 and math.isfinite(self.lam)):
            raise bad("lam", "must be finite and >= 0")
        if self.max_launches < 1:
            raise bad("max_launches", "must be >= 1")
        if self.optimizer not in OPTIMIZERS:
            raise bad("optimizer", f"must be one of {OPTIMIZERS}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise bad("learning_rate", "must be finite and > 0")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise bad("beta1", f"beta1 and beta2 (={self.beta2}) must be in [0, 1)")
        if not self.adam_eps > 0:
            raise bad("adam_eps", "must be > 0")
        if self.lr_schedule not in LR_SCHEDULES:
            raise bad("lr_schedule", f"must be one of {LR_SCHEDULES}")
        if not 0 <= self.warmup_frac < 1:
            raise bad("warmup_frac", "must be in [0, 1)")
        if not 0 <= self.min_lr_ratio <= 1:
            raise bad("min_lr_ratio", "must be in [0, 1]")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise bad("grad_clip", "must be > 0 or null")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise bad("seeds", "must be non-empty without duplicates")
        if self.checkpoint_every < 1:
            raise bad("checkpoint_every", "must be >= 1")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dict, rejecting unknown keys (keys starting with `_` are comments)."""
        return dataclass_from_dict(cls, data)

    @classmethod
    def from_file(cls, path: str | Path) -> TrainConfig:
        return cls.from_dict(read_json_config(path, "train"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def make_mdp(self) -> TokenMDP:
        return TokenMDP(
            num_prompts=self.num_prompts,
            vocab_size=self.vocab_size,
            max_length=self.max_length,
            reward=self.reward,  # type: ignore[arg-type]
            reward_scale=self.reward_scale,
            pattern_length=self.pattern_length,
            seed=self.mdp_seed,
        )

    def advantage_kind(self) -> str:
        """The advantage kind (`vcpo_baseline` for VCPO's own baseline under `"paper"`)."""
        if self.advantage != "paper":
            return self.advantage
        if self.method == "vcpo":
            return "vcpo_baseline"
        return PAPER_ADVANTAGE["grpo" if self.method == "gac" else self.method]


def generator_seed(run_seed: int, seed: int) -> int:
    """The seed of seed `seed`'s generator (independent of the other seeds of the run)."""
    return (run_seed * 1_000_003 + seed * 7_919 + 17) % (2**62)


def lr_at(config: TrainConfig, step: int) -> float:
    """Scheduled step size at update `step` (0-based): linear warm-up then cosine (B.1)."""
    peak = config.learning_rate
    if config.lr_schedule == "constant":
        return peak
    warmup = math.ceil(config.warmup_frac * config.num_steps)
    if step < warmup:
        return peak * (step + 1) / warmup
    span = max(1, config.num_steps - warmup)
    progress = min(1.0, (step - warmup) / span)
    low = peak * config.min_lr_ratio
    return low + (peak - low) * 0.5 * (1.0 + math.cos(math.pi * progress))


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
        adam_m, adam_v: `[S, *param]` Adam moments; schedules, generators, gac_states: per seed.
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
        self.gac_states = [hooks.GACState() for _ in config.seeds]
        self._exact: ExactState | None = None
        self.token_index = TokenIndex.build(self.mdp)
        # The last step's batch-level tensors, for diagnostics and tests: `log_ratio` `[S, B, G]`,
        # `raw_direction` / `direction` `[S, P]` (before / after GAC, before clipping),
        # `step_scale` `[S]` (VCPO's factor, 1 otherwise).
        self.last: dict[str, Tensor] = {}

    # -- schedules ------------------------------------------------------------------------------
    def _make_schedule(self) -> FixedDelaySchedule | LengthCoupledSchedule:
        if self.config.schedule == "fixed":
            return FixedDelaySchedule(self.config.delay)
        return LengthCoupledSchedule(
            _batch_mean_length,
            lam=self.config.lam,
            max_launches=self.config.max_launches,
            length_unit="tokens (mean response length of the batch)",
        )

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

        kind = cfg.advantage_kind()
        if kind == "vcpo_baseline":
            norms = trajectory_score_norm_sq(self.policy, exact.log_table, states, tokens, mask)
            advantages = hooks.vcpo_baseline_advantages(rewards, log_ratio, norms)
        else:
            advantages = adv_lib.compute(rewards, kind)  # type: ignore[arg-type]
        base = "grpo" if cfg.method == "gac" else cfg.method
        version_lag = lag.view(S, 1, 1).expand_as(log_ratio) if base == "a3po" else None
        psi = token_gradient_weights(
            base,  # type: ignore[arg-type]
            lp,
            lb,
            advantages.to(lp.dtype),
            mask,
            eps=cfg.eps,
            truncation=cfg.truncation,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
            version_lag=version_lag,
            a3po_mask_threshold=cfg.a3po_mask_threshold,
            aggregation="paper",
            max_length=cfg.max_length,
        )
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
        if cfg.method == "gac":
            cos, frac = [], []
            rows = []
            for s in range(S):
                projected, info = hooks.gac_project(
                    direction[s], self.gac_states[s], low=cfg.gac_low, high=cfg.gac_high
                )
                rows.append(projected)
                cos.append(info["gac/cosine"])
                frac.append(info["gac/removed_frac"])
            direction = torch.stack(rows)
            extra = {"gac/cosine": cos, "gac/removed_frac": frac}
        scale = torch.ones(S, dtype=torch.float64)
        if cfg.method == "vcpo":
            scale = torch.tensor(
                [hooks.vcpo_step_scale(log_ratio[s], cfg.vcpo_rho_ref) for s in range(S)],
                dtype=torch.float64,
            )
        self.last = {
            "log_ratio": log_ratio,
            "raw_direction": raw_direction,
            "direction": direction,
            "step_scale": scale,
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
        if base in TRAJECTORY_METHODS:
            diag = group_diagnostics(
                base,  # type: ignore[arg-type]
                log_ratio,
                cfg.eps,
                truncation=cfg.truncation,
            )
            removed = diag["removed_mass"].mean(dim=-1)
            capped = diag["capped"].any(dim=-1) if base == "gmc" else diag["capped"]
            capped_frac = capped.double().flatten(1).mean(dim=1)
            clipped = torch.full((S,), math.nan, dtype=torch.float64)
        else:
            removed = torch.full((S,), math.nan, dtype=torch.float64)
            capped_frac = torch.full((S,), math.nan, dtype=torch.float64)
            relevant = mask & (advantages != 0).unsqueeze(-1)
            zeroed = relevant & (psi == 0)
            clipped = zeroed.flatten(1).sum(1).double() / relevant.flatten(1).sum(1).clamp(min=1)
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
            self.adam_m.mul_(cfg.beta1).add_(d, alpha=1 - cfg.beta1)
            self.adam_v.mul_(cfg.beta2).addcmul_(d, d, value=1 - cfg.beta2)
            m_hat = self.adam_m / (1 - cfg.beta1**t)
            v_hat = self.adam_v / (1 - cfg.beta2**t)
            self.theta = self.theta + lr_b * m_hat / (v_hat.sqrt() + cfg.adam_eps)
        self.step += 1
        self._exact = None

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit for bit: parameters, optimizer, schedules, RNG."""
        return {
            "config": self.config.to_dict(),
            "step": self.step,
            "theta": self.theta.clone(),
            "adam_m": self.adam_m.clone(),
            "adam_v": self.adam_v.clone(),
            "generators": [g.get_state() for g in self.generators],
            "schedules": [s.state_dict() for s in self.schedules],
            "gac": [g.state_dict() for g in self.gac_states],
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
        for gac, gstate in zip(self.gac_states, state["gac"], strict=True):
            gac.load_state_dict(gstate)
        self._exact = None


def _batch_mean_length(batch: dict[str, Tensor]) -> float:
    """`L` of the length-coupled schedule: the batch's mean response length in tokens."""
    return float(batch["lengths"].double().mean())


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


__all__ = [
    "METHODS",
    "TRAIN_METHODS",
    "AsyncLearner",
    "ExactState",
    "TokenIndex",
    "TrainConfig",
    "batched_logit_gradient",
    "exact_state",
    "lr_at",
    "trajectory_score_norm_sq",
]
