"""Monte Carlo statistics of every estimator against the exact gradient.

For a pair `(theta, theta_behavior)` and a method, `M` independent minibatches of `B` groups of
`G` responses are drawn from the behavior policy, and each minibatch's gradient estimate is

    g = sum_{b, i, t} psi_{b,i,t} grad_theta log pi_theta(y_{b,i,t} | x_b, y_{b,i,<t}),

with `psi` from `gmc_grpo.estimators.token_gradient_weights` -- the same definition the surrogate
losses of `gmc_grpo.losses` (and so the LLM learner) are tested against -- and the exact per-token
scores of the softmax policy (`toy_mdps.enumeration.logit_gradient`). Everything is vectorised over the
`M` minibatches: `g` is a dense `[M, P]` tensor built with one scatter-add per chunk.

**Target.** With the paper's normalisation `1/(T B G)` (aggregation `paper`, `max_length = T`),
`E[g^IS] = grad J / T` (Lemma 1, eq. 2) *if the advantage's baseline of response `i` is
independent of `y_i`*: that holds for the leave-one-out advantage (`A_i = r_i - mean_{j!=i} r_j`,
the other responses are independent draws and `E_mu[rho_i grad log pi(y_i)] = 0`). With the
centered advantage `r_i - r_bar` (which contains `r_i / G`) `A_i = (G-1)/G * A_i^LOO`, so the IS
estimator has mean `((G-1)/G) grad J / T`: biased by the factor `(G-1)/G`, whatever the delay.
The `std` advantage targets a different, data-scaled objective. Hence the sweeps use `loo` for
every method by default (so methods differ only in their weighting, `docs/METHODS.md`);
`advantage = "paper"` uses each method's own (its `gmc_grpo.methods` spec) instead.

**Squared bias.** `||mean(g) - target||^2 - tr(Cov)/M` (the unbiased U-statistic
`1/(M(M-1)) sum_{i != j} <g_i - target, g_j - target>`), with a normal interval from the
delete-one jackknife variance of that U-statistic (closed form, no resampling loop).
Means (second moment, removed mass, capped fraction) get normal intervals from the sample
standard deviation over the `M` independent minibatches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product
from typing import Literal

import torch
from torch import Tensor

from gmc_grpo import advantages as adv_lib
from gmc_grpo.losses import PolicyLossConfig, gradient_weights, minibatch_diagnostics
from gmc_grpo.methods import get_method
from gmc_grpo.stats import normal_quantile
from toy_mdps.enumeration import (
    exact_gradient,
    log_policy_table,
    logit_gradient,
    response_token_logprobs,
)
from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import Policy, TabularSoftmax

AdvantageChoice = Literal["loo", "centered", "std", "paper"]

# Dense gradient entries per chunk (chunk * S * V): bounds the memory of one scatter-add.
_CHUNK_ENTRIES = 4_000_000


def advantage_kind(method: str, choice: AdvantageChoice) -> str:
    """The advantage kind of `method`: `choice`, or the method's own (its registry spec, Appendix
    B.1) for `paper`."""
    return get_method(method).advantage_kind(choice)


# ----------------------------------------------------------------------------------------------
# Sampling from the behavior policy
# ----------------------------------------------------------------------------------------------


def sample_groups(
    mdp: TokenMDP,
    behavior_logprobs: Tensor,
    num_minibatches: int,
    num_groups: int,
    group_size: int,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """Draw `M` minibatches of `B` groups of `G` responses: exact inverse-CDF sampling.

    Prompts are uniform; within a group the `G` responses are i.i.d. from `mu(. | x_b)`, drawn
    from the enumerated response distribution (one `searchsorted` into the concatenated CDFs).

    Args:
        behavior_logprobs: `[N]` `log mu(y | x)` of every response (`toy_mdps.enumeration`).
    Returns:
        `(prompts [M, B], responses [M, B, G])`, the latter global response indices.
    """
    K, n_x = mdp.num_prompts, mdp.responses_per_prompt
    probs = behavior_logprobs.double().exp().view(K, n_x)
    cdf = probs.cumsum(dim=1)
    cdf = cdf / cdf[:, -1:]
    cdf[:, -1] = 1.0
    flat = (cdf + torch.arange(K, dtype=cdf.dtype).unsqueeze(1)).reshape(-1)
    prompts = torch.randint(0, K, (num_minibatches, num_groups), generator=generator)
    u = torch.rand(
        (num_minibatches, num_groups, group_size), generator=generator, dtype=torch.float64
    )
    query = prompts.unsqueeze(-1).to(torch.float64) + u
    idx = torch.searchsorted(flat, query, right=True)
    idx = torch.minimum(idx, (prompts.unsqueeze(-1) + 1) * n_x - 1)
    return prompts, idx


# ----------------------------------------------------------------------------------------------
# Gradient estimates of many minibatches at once
# ----------------------------------------------------------------------------------------------


@dataclass
class Estimates:
    """Per-minibatch estimates and diagnostics (`L` minibatches).

    gradients: `[L, P]` flattened `g`.
    removed_mass: `[L]` mean over groups of `(1/G) sum (1 - w_i) rho_i` (0 for IS, NaN for the
        token-level methods).
    capped_frac: `[L]` fraction of groups (GMC) or trajectories (TIC, VCPO) with weight < 1
        (`ratio/capped_frac`; NaN for the token-level methods).
    clipped_token_frac: `[L]` fraction of response tokens with a nonzero advantage whose
        gradient the token clip (GRPO, A-3PO) or A-3PO's mask removed (NaN for the class).
    log_ratio_max: `[L]` largest trajectory log-ratio `s_i` in each minibatch.
    """

    gradients: Tensor
    removed_mass: Tensor
    capped_frac: Tensor
    clipped_token_frac: Tensor
    log_ratio_max: Tensor


@dataclass
class SampleTensors:
    """What every method's estimate of one chunk of minibatches reads (method-independent).

    tokens, states, mask: `[L, B, G, T]`; logprobs, behavior_logprobs: `[L, B, G, T]` token
    log-probs of `theta` and `theta_behavior` (0 on padding); rewards: `[L, B, G]`;
    advantages: kind -> `[L, B, G]`, filled on first use (`advantages_of`).
    """

    tokens: Tensor
    states: Tensor
    mask: Tensor
    logprobs: Tensor
    behavior_logprobs: Tensor
    rewards: Tensor
    advantages: dict[str, Tensor]

    def advantages_of(self, kind: str) -> Tensor:
        if kind not in self.advantages:
            self.advantages[kind] = adv_lib.compute(self.rewards, kind)  # type: ignore[arg-type]
        return self.advantages[kind]


def sample_tensors(
    mdp: TokenMDP, responses: Tensor, log_table: Tensor, behavior_log_table: Tensor
) -> SampleTensors:
    """The method-independent tensors of `[L, B, G]` responses (shared by every method and
    `eps` of a sweep cell)."""
    tokens = mdp.response_tokens[responses]  # [L, B, G, T]
    states = mdp.response_states[responses]
    mask = mdp.response_mask[responses]
    lp = log_table[states, tokens] * mask
    lb = behavior_log_table[states, tokens] * mask
    return SampleTensors(tokens, states, mask, lp, lb, mdp.rewards[responses], {})


def gradient_estimates(
    mdp: TokenMDP,
    responses: Tensor,
    log_table: Tensor,
    behavior_log_table: Tensor,
    config: PolicyLossConfig,
    *,
    advantage: str = "loo",
    version_lag: float | None = None,
    policy: Policy | None = None,
    samples: SampleTensors | None = None,
    out: Tensor | None = None,
) -> Estimates:
    """Each minibatch's estimate `g` of the method in `config`, vectorised over minibatches.

    Args:
        responses: `[L, B, G]` global response indices (`sample_groups`).
        log_table, behavior_log_table: `[S, V]` log-policies of `theta` and `theta_behavior`.
        config: the method and its constants; `aggregation` and `max_length` are used as given
            (the statistics use `aggregation="paper"`, `max_length=T`).
        advantage: the advantage kind (`"loo"`, `"centered"`, `"std"`).
        version_lag: A-3PO's learner versions between current and behavior policy.
        policy: the policy class (default tabular); `pullback` maps logit gradients to `theta`.
        samples: `sample_tensors(mdp, responses, log_table, behavior_log_table)` if already
            built (a sweep cell shares them across methods).
        out: `[L, P]` buffer for the gradients (written in place and returned as `gradients`).
    """
    pol = TabularSoftmax(mdp) if policy is None else policy
    L, B, G = responses.shape
    if samples is None:
        samples = sample_tensors(mdp, responses, log_table, behavior_log_table)
    lp, lb, mask = samples.logprobs, samples.behavior_logprobs, samples.mask
    adv = samples.advantages_of(advantage)
    # the lag reaches the losses that read it (A-3PO); the others ignore it
    lag = None if version_lag is None else torch.full((L, B, G), float(version_lag), dtype=lp.dtype)
    psi = gradient_weights(config, lp, lb, adv, mask, version_lag=lag)
    tabular = isinstance(pol, TabularSoftmax)
    logit_grad = logit_gradient(
        mdp,
        log_table,
        samples.states.reshape(L, -1),
        samples.tokens.reshape(L, -1),
        psi.reshape(L, -1),
        out=out if tabular else None,
    )
    grads = pol.pullback(logit_grad).reshape(L, -1)
    if out is not None and not tabular:
        grads = out.copy_(grads)
    s = (lp - lb).sum(dim=-1)  # [L, B, G]
    diag = minibatch_diagnostics(config, s, psi, adv, mask)
    return Estimates(
        grads,
        diag["removed_mass"],
        diag["capped_frac"],
        diag["clipped_token_frac"],
        s.flatten(1).max(dim=1).values,
    )


def _cat(parts: list[Estimates]) -> Estimates:
    return Estimates(
        *(torch.cat([getattr(p, f) for p in parts]) for f in Estimates.__dataclass_fields__)
    )


def chunk_size(mdp: TokenMDP) -> int:
    """Minibatches per chunk: bounds the dense `[chunk, S V]` logit gradient."""
    return max(1, _CHUNK_ENTRIES // (mdp.num_states * mdp.vocab_size))


def chunked_sample_tensors(
    mdp: TokenMDP, responses: Tensor, log_table: Tensor, behavior_log_table: Tensor
) -> list[SampleTensors]:
    """`sample_tensors` of each chunk of minibatches (`chunk_size`)."""
    size = chunk_size(mdp)
    return [
        sample_tensors(mdp, responses[i : i + size], log_table, behavior_log_table)
        for i in range(0, responses.shape[0], size)
    ]


def chunked_estimates(
    mdp: TokenMDP,
    responses: Tensor,
    log_table: Tensor,
    behavior_log_table: Tensor,
    config: PolicyLossConfig,
    *,
    samples: list[SampleTensors] | None = None,
    out: Tensor | None = None,
    **kw: object,
) -> Estimates:
    """`gradient_estimates` over chunks of minibatches (bounded memory), concatenated.

    `samples`: `chunked_sample_tensors(...)` if already built; `out`: an `[M, P]` buffer that
    receives the gradients (reused across calls: no fresh allocation of the largest tensor).
    """
    size = chunk_size(mdp)
    M = responses.shape[0]
    if samples is None:
        samples = chunked_sample_tensors(mdp, responses, log_table, behavior_log_table)
    parts = [
        gradient_estimates(
            mdp,
            responses[i : i + size],
            log_table,
            behavior_log_table,
            config,
            samples=chunk,
            out=None if out is None else out[i : i + size],
            **kw,  # type: ignore[arg-type]
        )
        for chunk, i in zip(samples, range(0, M, size), strict=True)
    ]
    if out is None:
        return _cat(parts)
    rest = {f: torch.cat([getattr(p, f) for p in parts]) for f in Estimates.__dataclass_fields__}
    rest["gradients"] = out
    return Estimates(**rest)


# ----------------------------------------------------------------------------------------------
# Statistics with confidence intervals
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval `[lo, hi]` at `level`."""

    value: float
    lo: float
    hi: float
    level: float

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi


def mean_interval(samples: Tensor, level: float = 0.95) -> Interval:
    """Normal interval for the mean of `[M]` i.i.d. samples (NaN samples give a NaN interval)."""
    x = samples.double()
    m = x.numel()
    mean = float(x.mean())
    se = float(x.std(unbiased=True)) / math.sqrt(m) if m > 1 else math.inf
    z = normal_quantile(level)
    return Interval(mean, mean - z * se, mean + z * se, level)


@dataclass(frozen=True)
class BiasEstimate:
    """`||E g - target||^2` debiased for Monte Carlo noise.

    interval: the U-statistic `raw - noise` with its jackknife normal interval.
    raw: `||mean(g) - target||^2`.
    noise: `tr(Cov(g)) / M` (sample covariance).
    """

    interval: Interval
    raw: float
    noise: float


def squared_bias(gradients: Tensor, target: Tensor, level: float = 0.95) -> BiasEstimate:
    """Debiased squared bias of `[M, P]` i.i.d. estimates against `[P]` `target`.

    `U = 1/(M(M-1)) sum_{i != j} <d_i, d_j>` with `d_i = g_i - target` equals
    `||mean d||^2 - tr(Cov)/M` and is unbiased for `||E g - target||^2`. Its variance is
    estimated by the delete-one jackknife, in closed form:
    `U_{-i} = (||S||^2 - 2 <S, d_i> - Q + 2 ||d_i||^2) / ((M-1)(M-2))`, `S = sum d`,
    `Q = sum ||d||^2`.
    """
    deviations = gradients.double().sub(target.double().reshape(1, -1))
    return _squared_bias_of_deviations(deviations, level)[0]


def _squared_bias_of_deviations(d: Tensor, level: float) -> tuple[BiasEstimate, Tensor]:
    """`(squared_bias, S = sum_m d_m)` from the deviations `d = g - target` `[M, P]`."""
    M = d.shape[0]
    if M < 3:
        raise ValueError(f"the jackknife needs at least 3 minibatches, got M={M}")
    S = d.sum(dim=0)
    q_i = torch.linalg.vector_norm(d, dim=1).square()
    Q = q_i.sum()
    SS = S @ S
    U = (SS - Q) / (M * (M - 1))
    u_loo = (SS - 2 * (d @ S) - Q + 2 * q_i) / ((M - 1) * (M - 2))
    var = (M - 1) / M * ((u_loo - u_loo.mean()) ** 2).sum()
    se = float(var.sqrt())
    z = normal_quantile(level)
    raw = float(SS) / M**2
    noise = float((Q - SS / M) / (M - 1)) / M
    u = float(U)
    return BiasEstimate(Interval(u, u - z * se, u + z * se, level), raw, noise), S


@dataclass(frozen=True)
class EstimatorStatistics:
    """Everything measured for one `(theta, theta_behavior, method, eps, G)` point."""

    bias: BiasEstimate
    second_moment: Interval
    removed_mass: Interval
    capped_frac: Interval
    clipped_token_frac: Interval
    mean_gradient: Tensor  # [P]
    target: Tensor  # [P] grad J / T
    num_minibatches: int


def estimator_statistics(
    mdp: TokenMDP,
    theta: Tensor,
    theta_behavior: Tensor,
    config: PolicyLossConfig,
    *,
    num_minibatches: int,
    num_groups: int,
    group_size: int,
    generator: torch.Generator,
    advantage: AdvantageChoice = "loo",
    version_lag: float | None = None,
    policy: Policy | None = None,
    level: float = 0.95,
    target: Tensor | None = None,
) -> EstimatorStatistics:
    """Draw `M` minibatches from `theta_behavior` and measure the estimator at `theta`.

    `config.max_length` must be `None` or `T`; the statistics always use `max_length = T` so the
    normalisation is `1/(T B G)` and the target is `grad J(theta) / T` (Lemma 1).
    """
    cfg = _paper_normalised(mdp, config)
    log_table = log_policy_table(mdp, theta, policy)
    behavior_table = log_policy_table(mdp, theta_behavior, policy)
    behavior_lp = response_token_logprobs(mdp, behavior_table).sum(dim=-1)
    _, responses = sample_groups(
        mdp, behavior_lp, num_minibatches, num_groups, group_size, generator
    )
    est = chunked_estimates(
        mdp,
        responses,
        log_table,
        behavior_table,
        cfg,
        advantage=advantage_kind(cfg.method, advantage),
        version_lag=version_lag,
        policy=policy,
    )
    if target is None:
        target = exact_gradient(mdp, theta, policy).reshape(-1) / mdp.max_length
    return summarise(est, target, level)


def summarise(
    est: Estimates, target: Tensor, level: float = 0.95, *, in_place: bool = False
) -> EstimatorStatistics:
    """Intervals for the bias, second moment and diagnostics of per-minibatch estimates.

    `in_place=True` turns `est.gradients` (float64) into the deviations `g - target` instead of
    allocating them (the same numbers; `est.gradients` is not usable afterwards).
    """
    g = est.gradients.double()
    second = mean_interval(torch.linalg.vector_norm(g, dim=1).square(), level)
    flat_target = target.double().reshape(1, -1)
    deviations = g.sub_(flat_target) if in_place else g.sub(flat_target)
    bias, total = _squared_bias_of_deviations(deviations, level)
    mean_gradient = flat_target[0] + total / g.shape[0]  # target + mean(g - target)
    return EstimatorStatistics(
        bias=bias,
        second_moment=second,
        removed_mass=mean_interval(est.removed_mass, level),
        capped_frac=mean_interval(est.capped_frac, level),
        clipped_token_frac=mean_interval(est.clipped_token_frac, level),
        mean_gradient=mean_gradient,
        target=target.reshape(-1).double(),
        num_minibatches=int(g.shape[0]),
    )


def _paper_normalised(mdp: TokenMDP, config: PolicyLossConfig) -> PolicyLossConfig:
    if config.aggregation != "paper":
        raise ValueError(
            f"estimator statistics use the paper's 1/(T B G) normalisation; got aggregation="
            f"{config.aggregation!r}"
        )
    if config.max_length not in (None, mdp.max_length):
        raise ValueError(
            f"PolicyLossConfig.max_length must be None or T={mdp.max_length}, got {config.max_length}"
        )
    return PolicyLossConfig(**{**config.__dict__, "max_length": mdp.max_length})


# ----------------------------------------------------------------------------------------------
# Exact moments by enumerating all groups (tiny MDPs)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExactMoments:
    """Exact `E g`, `E ||g||^2` (one group per minibatch, `B = 1`) and the exact squared bias."""

    mean: Tensor  # [P]
    second_moment: float
    bias_sq: float
    removed_mass: float


def exact_estimator_moments(
    mdp: TokenMDP,
    theta: Tensor,
    theta_behavior: Tensor,
    config: PolicyLossConfig,
    *,
    group_size: int,
    advantage: AdvantageChoice = "loo",
    version_lag: float | None = None,
    policy: Policy | None = None,
) -> ExactMoments:
    """Enumerate all `K N_x^G` groups with their probabilities `(1/K) prod_i mu(y_i | x)`.

    Only for tiny MDPs (`N_x^G` groups per prompt); `B = 1`, and `E g` does not depend on `B`.
    """
    cfg = _paper_normalised(mdp, config)
    K, n_x = mdp.num_prompts, mdp.responses_per_prompt
    if K * n_x**group_size > 2_000_000:
        raise ValueError(
            f"{K * n_x**group_size} groups to enumerate; use a smaller MDP or group size"
        )
    log_table = log_policy_table(mdp, theta, policy)
    behavior_table = log_policy_table(mdp, theta_behavior, policy)
    behavior_lp = response_token_logprobs(mdp, behavior_table).sum(dim=-1)
    local = torch.tensor(list(product(range(n_x), repeat=group_size)), dtype=torch.long)
    responses = (torch.arange(K).view(K, 1, 1) * n_x + local.unsqueeze(0)).reshape(
        -1, 1, group_size
    )
    weight = behavior_lp[responses].sum(dim=(1, 2)).exp() / K  # [K n_x^G]
    est = chunked_estimates(
        mdp,
        responses,
        log_table,
        behavior_table,
        cfg,
        advantage=advantage_kind(cfg.method, advantage),
        version_lag=version_lag,
        policy=policy,
    )
    g = est.gradients.double()
    mean = (weight.unsqueeze(1) * g).sum(dim=0)
    target = exact_gradient(mdp, theta, policy).reshape(-1).double() / mdp.max_length
    second = float((weight * (g**2).sum(dim=1)).sum())
    removed = float((weight * est.removed_mass).sum())
    return ExactMoments(mean, second, float(((mean - target) ** 2).sum()), removed)
