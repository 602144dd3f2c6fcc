"""The quantities of §4.2's chain along an LLM run, measured on the learner's own parameters.

§4.2 bounds the correction bias of an update in three steps: the removed importance mass (step
1), which the KL between the current and the behavior policy bounds (step 2: removed mass `<=
KL / log(1 + 2 eps)` for GMC, `KL / c_eps` for TIC), which the parameter drift bounds (step 3:
`KL <= (T L / 2) ||theta_n - theta_{n - tau}||^2`), which the second moment limits to
`O(eta^2 tau^2)`. The learner already logs the removed mass, the capped fraction and the entropy
of every update (`ratio/removed_mass`, `ratio/capped_frac`, `policy/entropy`), and the lag-0
engine/learner mismatch (`mismatch/*`, `llm_runs.train`). `BoundTracker` adds the rest
(`LLMTrainConfig.bound_every = K > 0`; the trainer calls `BoundTracker.measure` once per
update, before the update, and puts the fields into the update's row):

Every update `n` (exact; `tau_b` is group `b`'s lag, the fields are means over the groups):

- `bounds/drift_sq`: `||theta_n - theta_{n - tau_b}||^2`, from parameter snapshots;
- `bounds/drift_path`: `tau_b sum_{k = n - tau_b}^{n - 1} ||theta_{k+1} - theta_k||^2`, the
  pathwise bound of the drift (Cauchy-Schwarz; it always holds). `drift_sq / drift_path` is 1
  when the `tau` steps are parallel (the drift grows like `tau^2`, the `O(eta^2 tau^2)` of step
  3) and about `1 / tau` when they are uncorrelated (like `tau`).

Every `K` updates and at the last one:

- `bounds/kl_estimate`, `_lo`, `_hi`: `(1/B) sum_b KL(pi_theta_n(. | x_b) || pi_theta_{n - tau_b}
  (. | x_b))`, the sequence-level KL (nats per response) over the consumed batch's prompts, with
  its 95% interval. Estimated from `bound_samples` responses per prompt sampled from
  `pi_theta_n` (the learner's model, at the run's temperature, top-p 1): each response
  contributes `sum_t KL(pi_theta_n(. | h_t) || pi_theta_{n-tau}(. | h_t))`, the exact KL of the
  two next-token distributions at each prefix `h_t` of the response (full vocabulary), summed
  over its tokens. Its mean is the sequence KL (`E_pi [sum_t log pi / mu] = E_pi [sum_t
  KL_t]`), it is never negative, and its variance is below that of the plain log-ratio
  estimator (it is that estimator's conditional expectation given the prefixes). The learner's
  `ratio/kl_estimate` instead averages `rho s - rho + 1` over the batch's behavior samples:
  unbiased too, but heavy-tailed once the ratios spread. The interval is stratified by prompt:
  `sqrt(sum_b s_b^2 / M) / B` with Student's `t` on `B (M - 1)` degrees of freedom. At lag 0 the
  two policies are the same parameters and the KL is exactly 0 (no sampling).

Nothing the training reads is touched: the samples come from the tracker's own generator
(stream `llm_bounds` of `gmc_grpo.seeding` at the update's step), the model is put in eval mode
for the measurement and back, and the behavior policy is a second copy of the model loaded with
the snapshot; a tracked run's training records equal an untracked run's (a test compares them).

**Memory.** The snapshots hold every learner version from the oldest one a pending batch was
generated from up to `n`: `(max lag + 1)` copies of the parameters in float32 on the CPU (the
tiny model: 1.4 MB each). For a Qwen3-1.7B at `D = 128` that is 129 x 6.8 GB: not affordable;
the tracker refuses to start when a fixed delay's snapshots would exceed `MAX_SNAPSHOT_BYTES`
(and stops a run whose snapshots grow past it), so on large models the bounds' quantities stay
those the learner logs. A resumed run's tracker starts empty: the updates whose behavior
version precedes the resume record no drift and no KL.

Shapes: `B` groups, `M` responses per prompt for the KL, `T` response tokens, `V` vocabulary.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from gmc_grpo.seeding import torch_generator
from gmc_grpo.stats import t_quantile
from llm_runs.engines.hf import eos_token_ids

if TYPE_CHECKING:
    from llm_runs.config import BoundSettings

#: the most bytes of parameter snapshots the tracker keeps (see the module docstring)
MAX_SNAPSHOT_BYTES = 4 * 2**30


def flat_parameters(model: torch.nn.Module) -> Tensor:
    """`[P]` float32 copy of the model's parameters on the CPU, in `parameters()` order."""
    return torch.cat([p.detach().reshape(-1).float().cpu() for p in model.parameters()])


def stratified_mean(values: Tensor, level: float = 0.95) -> dict[str, float]:
    """Mean over prompts of the per-prompt means of `values` `[B, M]`, with its interval.

    Each prompt's mean estimates that prompt's quantity from `M` independent samples; the
    standard error of the mean over prompts is `sqrt(sum_b s_b^2 / M) / B` (`s_b^2`: prompt `b`'s
    sample variance), and the interval uses Student's `t` on `B (M - 1)` degrees of freedom.
    Returns `{"value", "lo", "hi", "se"}` (an interval of width 0 with `M = 1`: no spread known).
    """
    x = values.double()
    b, m = x.shape
    value = float(x.mean())
    if m < 2:
        return {"value": value, "lo": math.nan, "hi": math.nan, "se": math.nan}
    se = math.sqrt(float(x.var(dim=1, unbiased=True).sum()) / m) / b
    half = t_quantile(b * (m - 1), level) * se
    return {"value": value, "lo": value - half, "hi": value + half, "se": se}


@torch.no_grad()
def sample_responses(
    model: torch.nn.Module,
    prompts: Tensor,
    max_tokens: int,
    eos_ids: Sequence[int],
    temperature: float,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """One response per row of `prompts` `[R, P]` (token ids, all of one length) sampled from
    `model` (softmax of logits / temperature over the full vocabulary): `(tokens [R, T], mask
    [R, T])`, `T <= max_tokens`, the mask True up to and including each response's first EOS."""
    device = next(model.parameters()).device
    out = model(input_ids=prompts.to(device), use_cache=True)
    cache, logits = out.past_key_values, out.logits[:, -1]
    eos = torch.tensor(list(eos_ids), dtype=torch.long, device=device)
    done = torch.zeros(prompts.shape[0], dtype=torch.bool, device=device)
    tokens, mask = [], []
    for _ in range(max_tokens):
        probs = torch.softmax(logits.float() / temperature, dim=-1).cpu()
        chosen = torch.multinomial(probs, 1, generator=generator).squeeze(-1).to(device)
        mask.append(~done)
        tokens.append(chosen)
        done = done | torch.isin(chosen, eos)
        if bool(done.all()):
            break
        out = model(input_ids=chosen[:, None], past_key_values=cache, use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1]
    return torch.stack(tokens, dim=1), torch.stack(mask, dim=1)


@torch.no_grad()
def response_kl(
    current: torch.nn.Module,
    behavior: torch.nn.Module,
    prompts: Tensor,
    tokens: Tensor,
    mask: Tensor,
    temperature: float,
) -> Tensor:
    """`[R]` per response `sum_t KL(pi_current(. | h_t) || pi_behavior(. | h_t))` over its tokens
    (`mask`), each term the exact KL of the two next-token distributions at the prefix `h_t`;
    `prompts` `[R, P]` of one length, `tokens`, `mask` `[R, T]`."""
    width = tokens.shape[1]
    ids = torch.cat([prompts.to(tokens.device), tokens], dim=1)
    start = prompts.shape[1] - 1  # the logits at position P - 1 + t give response token t

    def log_policy(model: torch.nn.Module) -> Tensor:
        logits = model(input_ids=ids).logits[:, start : start + width].float()
        return torch.log_softmax(logits / temperature, dim=-1)

    log_p, log_q = log_policy(current), log_policy(behavior)
    per_token = (log_p.exp() * (log_p - log_q)).sum(-1).clamp(min=0.0)  # [R, T]
    return (per_token * mask.float()).sum(-1)


class BoundTracker:
    """Drift, its pathwise bound and the current/behavior KL of each update (module docstring).

    every: `K`, the stride of the KL measurement; samples: `M`, responses per prompt for the KL;
    total_steps: the run's last update is measured too; temperature: the sampling temperature of
    the run (the policies are `softmax(logits / temperature)`); max_tokens: response budget;
    eos_ids: the tokens that end a response; seed: the run's seed (root of stream `llm_bounds`).
    """

    def __init__(
        self,
        *,
        every: int,
        samples: int,
        total_steps: int,
        temperature: float,
        max_tokens: int,
        eos_ids: Sequence[int],
        seed: int,
        max_bytes: int = MAX_SNAPSHOT_BYTES,
    ) -> None:
        if every < 1 or samples < 1:
            raise ValueError(
                f"BoundTracker: every={every} and samples={samples} must be >= 1 "
                "(LLMTrainConfig.bound_every, bound_samples)"
            )
        self.every, self.samples, self.total_steps = every, samples, total_steps
        self.temperature, self.max_tokens = temperature, max_tokens
        self.eos_ids = list(eos_ids)
        self.seed, self.max_bytes = seed, max_bytes
        self.history: dict[int, Tensor] = {}  # version -> [P] parameters
        self.step_sq: dict[int, float] = {}  # version k -> ||theta_{k+1} - theta_k||^2
        self._behavior: torch.nn.Module | None = None

    @classmethod
    def for_run(
        cls, settings: BoundSettings, tokenizer: Any, model: torch.nn.Module
    ) -> BoundTracker | None:
        """The tracker of a run's `BoundSettings` (None when `bound_every` is 0); refuses a
        fixed delay whose snapshots would not fit in `MAX_SNAPSHOT_BYTES`."""
        if not settings.bound_every:
            return None
        tracker = cls(
            every=settings.bound_every,
            samples=settings.bound_samples,
            total_steps=settings.total_steps,
            temperature=settings.temperature,
            max_tokens=settings.max_completion_tokens,
            eos_ids=sorted(eos_token_ids(tokenizer, model)),
            seed=settings.run_seed,
            max_bytes=MAX_SNAPSHOT_BYTES,
        )
        largest_lag = settings.largest_lag
        if largest_lag is not None:  # known before the run (a fixed delay): refuse early
            versions = largest_lag + settings.inner_steps + 1
            need = versions * 4 * sum(p.numel() for p in model.parameters())
            if need > tracker.max_bytes:
                raise ValueError(
                    f"LLMTrainConfig.bound_every={settings.bound_every}: the drift needs "
                    f"{versions} parameter snapshots ({need / 2**30:.1f} GiB, more than "
                    f"{tracker.max_bytes / 2**30:.0f} GiB) at lag {largest_lag}: set it to 0 "
                    "on this model (the learner still logs removed mass, capped fraction, "
                    "entropy and ratio/kl_estimate)"
                )
        return tracker

    def measure(
        self, model: torch.nn.Module, batch: Any, step: int, schedule: Any
    ) -> dict[str, float | None]:
        """The `bounds/*` fields of update `step` on `batch` (a `TrajectoryBatch`), measured
        before the update (`model` holds `theta_step`). `schedule`: the run's staleness schedule
        (the snapshots of the versions its pending batches were generated from are kept)."""
        started = time.perf_counter()
        self._snapshot(model, step)
        versions = [int(v) for v in batch.behavior_version.tolist()]
        lags = [step - v for v in versions]
        out: dict[str, float | None] = {}
        drifts, paths = [], []
        for version, lag in zip(versions, lags, strict=True):
            if version not in self.history:
                drifts = []
                break
            drifts.append(float((self.history[step] - self.history[version]).pow(2).sum()))
            window = [self.step_sq.get(k) for k in range(version, step)]
            paths.append(None if None in window else lag * sum(window))  # type: ignore[arg-type]
        if drifts:
            out["bounds/drift_sq"] = sum(drifts) / len(drifts)
            if None not in paths:
                out["bounds/drift_path"] = sum(paths) / len(paths)  # type: ignore[arg-type]
        if (step % self.every == 0 or step == self.total_steps - 1) and drifts:
            kl = self._kl(model, batch, versions, step)
            out.update(
                {
                    "bounds/kl_estimate": kl["value"],
                    "bounds/kl_estimate_lo": kl["lo"],
                    "bounds/kl_estimate_hi": kl["hi"],
                }
            )
        self._prune(min([*pending_behavior_versions(schedule), *versions, step]))
        out["perf/bounds_seconds"] = time.perf_counter() - started
        return out

    # -- helpers --------------------------------------------------------------------------------

    def _snapshot(self, model: torch.nn.Module, step: int) -> None:
        theta = flat_parameters(model)
        if step - 1 in self.history:
            self.step_sq[step - 1] = float((theta - self.history[step - 1]).pow(2).sum())
        self.history[step] = theta
        used = sum(t.numel() * t.element_size() for t in self.history.values())
        if used > self.max_bytes:
            raise RuntimeError(
                f"the bound tracker's parameter snapshots reached {used / 2**30:.1f} GiB (more "
                f"than {self.max_bytes / 2**30:.0f} GiB) at step {step}: the lags are too large "
                "for this model; rerun with bound_every=0"
            )

    def _prune(self, oldest: int) -> None:
        """Forget the versions older than `oldest` (no pending batch was generated from them)."""
        for version in [v for v in self.history if v < oldest]:
            del self.history[version]
        for version in [v for v in self.step_sq if v < oldest]:
            del self.step_sq[version]

    def _behavior_model(self, model: torch.nn.Module, version: int) -> torch.nn.Module:
        if self._behavior is None:
            self._behavior = copy.deepcopy(model).eval()
            for p in self._behavior.parameters():
                p.requires_grad_(False)
        torch.nn.utils.vector_to_parameters(
            self.history[version].to(next(model.parameters()).device),
            self._behavior.parameters(),
        )
        return self._behavior

    def _kl(
        self, model: torch.nn.Module, batch: Any, versions: Sequence[int], step: int
    ) -> dict[str, float]:
        """`stratified_mean` of the per-response KL over the batch's prompts (module docstring);
        the prompts of one behavior version and one token length are sampled as one batch."""
        b, m = len(versions), self.samples
        values = torch.zeros(b, m, dtype=torch.float64)  # a group of lag 0 stays exactly 0
        cells: dict[tuple[int, int], list[int]] = {}
        for index, version in enumerate(versions):
            if version != step:
                cells.setdefault((version, int(batch.prompt_len[index, 0])), []).append(index)
        if not cells:
            return {"value": 0.0, "lo": 0.0, "hi": 0.0, "se": 0.0}
        generator = torch_generator(self.seed, "llm_bounds", step)
        training = model.training
        model.eval()
        try:
            for (version, length), rows in sorted(cells.items()):
                behavior = self._behavior_model(model, version)
                prompts = batch.input_ids[rows, 0, :length].long().repeat_interleave(m, dim=0)
                tokens, mask = sample_responses(
                    model, prompts, self.max_tokens, self.eos_ids, self.temperature, generator
                )
                kl = response_kl(model, behavior, prompts, tokens, mask, self.temperature)
                values[rows] = kl.double().cpu().view(len(rows), m)
        finally:
            model.train(training)
        return stratified_mean(values)


def pending_behavior_versions(schedule: Any) -> list[int]:
    """Behavior versions of the items a schedule holds and has not handed out."""
    return [int(entry.behavior_version) for entry in schedule.pending_entries()]
