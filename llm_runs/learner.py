"""The full-actor learner: per-token log-probs of a causal LM and one optimizer update per minibatch.

Design (the one measured in `bench/gpu_learner_step.py`, which imports these functions):

- **Log-probs.** The transformer body runs once per micro-batch, by default on the micro-batch's
  real tokens packed into one sequence with attention kept inside each trajectory
  (`llm_runs.packing`; `LearnerSettings.packed=False` runs the right-padded batch instead, the
  reference path, same values up to float rounding). The log-softmax over the vocabulary is
  computed on the response positions only, in chunks of `chunk` positions, each chunk under
  activation checkpointing, so the full `[tokens, vocab]` float32 logits never exist at once. The
  same chunk also gives the current policy's token entropy (detached; Figure 4).
- **Micro-batches hold whole groups**: `groups_per_micro` groups each, or as many consecutive
  groups as fit in `micro_batch_tokens` real tokens. Every method's coefficient depends only on
  the group (GMC's `rho_bar`) or on the trajectory/token, so the coefficient computed from a
  micro-batch's own forward pass is the full-batch one. `policy_loss` normalises a micro-batch of
  `b` groups by `1/(T b G)`; scaling it by `b / B` makes the accumulated gradient exactly the
  full-batch gradient under the paper's `1/(T B G)` (tested against the core estimator's hand
  formula), whatever the micro-batches' sizes.
- **One update** (`Learner.step`): advantages (the method's kind, or its baseline hook),
  accumulated gradient, the method's gradient edit, gradient-norm clip, the method's step-size
  scale, optimizer step, scheduler step. The method and its hooks come from its registry spec
  (`gmc_grpo.methods`: VCPO's minimum-variance baseline and ESS step size, GAC's projection);
  nothing here names a method. A baseline that needs per-trajectory score norms gets them out of
  each micro-batch's own backward (`llm_runs.sample_norms`) when it has a group form (VCPO's
  does); GAC's projection runs parameter by parameter in place. Diagnostics are recomputed on
  the full minibatch from the detached log-probs, so they do not depend on the micro-batching.

- **Precision** (`llm_runs.precision`): every forward of the learner's model runs in its compute
  dtype (bfloat16 autocast under the CUDA default, float32 parameters and AdamW states), every
  backward outside the autocast context; `check_optimizer` refuses an optimizer that cannot be
  built before any compute (the paper recipes' 8-bit AdamW without bitsandbytes).

Shapes: `B` groups, `G` responses per group, `S` padded prompt + response length, `T` padded
response length, `H` hidden size, `V` vocabulary.

`token_logprobs`, `micro_logprobs(..., packed=False)` and `Learner.trajectory_scores` are the
padded and per-trajectory references the fast paths are tested against.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from gmc_grpo import advantages as advantage_lib
from gmc_grpo.losses import PolicyLossConfig, policy_loss
from gmc_grpo.methods import MethodSettings, get_method
from llm_runs.batch import (  # noqa: F401 (re-exported: the learner's public names)
    TrajectoryBatch,
    batch_from,
    batch_logprobs,
    micro_logprobs,
    packed_micro_logprobs,
    tensors_of,
)
from llm_runs.choices import OPTIMIZER_KINDS, SCORE_NORM_MODES  # noqa: F401 (re-exported)
from llm_runs.logprobs import (  # noqa: F401 (re-exported)
    chunked_token_logprobs,
    chunked_token_logprobs_entropy,
    output_embedding,
    response_logprobs,
    token_logprobs,
)
from llm_runs.packing import micro_batch_ranges
from llm_runs.precision import compute_autocast

# --------------------------------------------------------------------------------------------
# Optimizer (the learning-rate schedule is the core's: `gmc_grpo.schedules`)
# --------------------------------------------------------------------------------------------


#: the fix a run without bitsandbytes is told (`check_optimizer`)
ADAMW8BIT_FIX = (
    "`pip install bitsandbytes` (or `pip install -e '.[gpu]'` in a gmc-grpo clone), or train with torch's AdamW "
    "on purpose: `--set optimizer=adamw`"
)


#: bitsandbytes keeps a parameter's AdamW states in 8 bits only from this many elements on
#: (`Optimizer8bit`'s `min_8bit_size`, default 4096); smaller ones get 32-bit states
BNB_MIN_8BIT_SIZE = 4096


@functools.lru_cache(maxsize=4)
def bitsandbytes_8bit_failure(device_type: str) -> str | None:
    """Why bitsandbytes' `AdamW8bit` cannot step on a `device_type` tensor here (None: it can).

    Asked once per device type by one update of a `BNB_MIN_8BIT_SIZE`-element parameter, the
    smallest that gets 8-bit states: bitsandbytes >= 0.49 has CPU kernels for its 8-bit
    optimizers (seen with 0.50.1, issue 32); older releases and missing native libraries fail
    here, before the run computes anything.
    """
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        return "bitsandbytes is not installed"
    import logging
    from importlib.metadata import version

    # its CPU backend logs a warning at import about a 4-bit matmul kernel from the `kernels`
    # package, which 8-bit AdamW does not use
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    try:
        import bitsandbytes as bnb  # type: ignore[import-not-found]

        param = torch.nn.Parameter(torch.ones(BNB_MIN_8BIT_SIZE, device=device_type))
        param.grad = torch.ones_like(param)
        bnb.optim.AdamW8bit([param], lr=1e-3).step()
    except Exception as err:  # any failure of a foreign native library: reported, not hidden
        return f"bitsandbytes {version('bitsandbytes')} failed: {type(err).__name__}: {err}"
    return None


def check_optimizer(kind: str, device: torch.device) -> None:
    """Refuse, before any compute, an optimizer that cannot be built on `device`.

    `"adamw8bit"` (the paper recipes', Appendix B.1) needs an importable bitsandbytes and, off
    CUDA, one whose 8-bit AdamW steps on `device` (`bitsandbytes_8bit_failure`: its CPU kernels,
    bitsandbytes >= 0.49); the error names the fix. `"auto"` and `"adamw"` always pass (`"auto"`
    falls back to torch AdamW with a notice, `make_optimizer`).
    """
    if kind not in OPTIMIZER_KINDS:
        raise ValueError(f"optimizer must be one of {OPTIMIZER_KINDS}, got {kind!r}")
    if kind != "adamw8bit":
        return
    import importlib.util

    if device.type != "cuda":
        failure = bitsandbytes_8bit_failure(device.type)
        if failure is not None:
            raise ValueError(
                f"optimizer='adamw8bit' (bitsandbytes' 8-bit AdamW, Appendix B.1) needs a CUDA "
                f"device or a bitsandbytes whose 8-bit AdamW runs on {device.type} (>= 0.49): "
                f"the learner is on {device} and {failure}; train with torch's AdamW on purpose, "
                "`--set optimizer=adamw`"
            )
        return
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError(
            f"optimizer='adamw8bit' needs bitsandbytes, which is not installed: {ADAMW8BIT_FIX}"
        )


def optimizer_memory_factor(param_dtype: torch.dtype) -> int:
    """How many times the memory of 8-bit AdamW's states torch AdamW's take: two states of the
    parameters' dtype (`2 x element size` bytes per parameter) against two 1-byte states (block
    statistics aside): 4 for float32 parameters, 2 for bfloat16."""
    return torch.empty((), dtype=param_dtype).element_size()


def make_optimizer(
    params: Iterable[torch.nn.Parameter],
    *,
    kind: str,
    lr: float,
    betas: tuple[float, float],
    weight_decay: float,
    device: torch.device,
    notice: Callable[[str], None] = print,
) -> tuple[torch.optim.Optimizer, str]:
    """The optimizer of Appendix B.1 and its name.

    kind: `"adamw8bit"` (bitsandbytes' 8-bit AdamW, the paper's; refused by `check_optimizer`
    where it cannot run), `"adamw"` (`torch.optim.AdamW`) or `"auto"` (8-bit AdamW on CUDA when
    bitsandbytes imports, else torch AdamW with a notice naming the memory factor). The paper
    recipes name `"adamw8bit"`, so they never change optimizer silently.
    """
    params = list(params)
    check_optimizer(kind, device)
    if kind == "adamw8bit" and device.type != "cuda":  # passed check_optimizer: it steps here
        import bitsandbytes as bnb  # type: ignore[import-not-found]

        notice(
            f"notice: optimizer='adamw8bit' on {device.type}: bitsandbytes "
            f"{bnb.__version__}'s {device.type} kernels, the same 8-bit AdamW as on CUDA up to "
            "rounding, for tests and small runs (the paper's runs use CUDA)"
        )
        opt = bnb.optim.AdamW8bit(params, lr=lr, betas=betas, weight_decay=weight_decay)
        return opt, "bitsandbytes.AdamW8bit"
    if kind in ("auto", "adamw8bit") and device.type == "cuda":
        try:
            import bitsandbytes as bnb  # type: ignore[import-not-found]

            opt = bnb.optim.AdamW8bit(params, lr=lr, betas=betas, weight_decay=weight_decay)
            return opt, "bitsandbytes.AdamW8bit"
        except ImportError:
            if kind == "adamw8bit":
                raise ImportError(
                    f"optimizer='adamw8bit': bitsandbytes failed to import: {ADAMW8BIT_FIX}"
                ) from None
    if kind == "auto":
        where = "bitsandbytes is not installed" if device.type == "cuda" else "not on CUDA"
        dtype = params[0].dtype if params else torch.float32
        factor = optimizer_memory_factor(dtype)
        name = str(dtype).removeprefix("torch.")
        notice(
            f"notice: using torch.optim.AdamW, not the 8-bit AdamW of Appendix B.1 ({where}); "
            f"its two {name} states take {factor}x the memory of 8-bit AdamW's "
            f"({2 * factor} bytes per parameter instead of 2); the update is the same up to "
            "quantisation"
        )
    opt = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    return opt, "torch.optim.AdamW"


# --------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------


@dataclass
class LearnerSettings:
    """What one update needs besides the model and the optimizer (built from `LLMTrainConfig`)."""

    method: str
    """a registered method (`gmc_grpo.methods`); its spec supplies the hooks"""
    loss: PolicyLossConfig
    """the core loss config (method, eps, clips, `max_length = T` of `1/(T B G)`)"""
    advantage: str
    """"paper" (the method's own kind, or its baseline hook) or a kind (`gmc_grpo.advantages`)"""
    groups_per_micro: int
    """groups per micro-batch (must divide the minibatch's groups)"""
    logit_chunk: int
    """positions per log-softmax chunk"""
    grad_clip: float
    """gradient-norm clip (1.0, B.1); `inf` disables it"""
    behavior_source: str = "engine"
    """`"engine"` or `"learner"` log-probs as `mu` in the ratio"""
    method_settings: MethodSettings = field(default_factory=MethodSettings)
    """the constants the method's hooks read (VCPO's rho_ref, GAC's thresholds, ...)"""
    packed: bool = True
    """pack each micro-batch's real tokens into one sequence (`llm_runs.packing`, the default) or
    run the right-padded batch (the reference path; same gradient)"""
    micro_batch_tokens: int = 0
    """0: `groups_per_micro` groups per micro-batch; > 0: consecutive whole groups up to this many
    real (prompt + response) tokens each (a larger group alone)"""
    score_norms: str = "in_backward"
    """how a baseline that needs `||grad log pi(y_i)||^2` (VCPO's) gets them: `"in_backward"`
    (per-trajectory gradients inside each micro-batch's own backward, `llm_runs.sample_norms`;
    needs `packed` and a baseline with a group form) or `"per_trajectory"` (one extra forward +
    backward per trajectory, the reference)"""


class Learner:
    """Owns the model, the optimizer, the scheduler and the method's state (its gradient edit's).

    `step(batch, version)` performs one optimizer update on a minibatch and returns its metrics
    (`gmc_grpo.records.METRIC_NAMES`).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        settings: LearnerSettings,
    ) -> None:
        self.spec = get_method(settings.method)
        if settings.score_norms not in SCORE_NORM_MODES:
            raise ValueError(
                f"LearnerSettings.score_norms must be one of {SCORE_NORM_MODES}, "
                f"got {settings.score_norms!r}"
            )
        if self._norms_in_backward(settings) and not settings.packed:
            raise ValueError(
                "LearnerSettings.score_norms='in_backward' needs packed=True (the per-trajectory "
                "gradients are read off the packed sequence); use score_norms='per_trajectory' "
                "with the padded path"
            )
        if settings.micro_batch_tokens < 0:
            raise ValueError(
                f"LearnerSettings.micro_batch_tokens must be >= 0 (0: fixed groups_per_micro), "
                f"got {settings.micro_batch_tokens}"
            )
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.settings = settings
        edit = self.spec.gradient_edit
        # state carried between updates by the method's gradient edit (GAC: the last gradient)
        self.method_state = edit.init_state() if edit is not None else None
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.device = next(model.parameters()).device
        self.last_logprobs: Tensor | None = None  # [B, G, T] current log-probs of the last step

    # -- gradient ----------------------------------------------------------------------------

    def advantages(
        self, batch: TrajectoryBatch, behavior: Tensor
    ) -> tuple[Tensor, dict[str, float]]:
        """`[B, G]` advantages of the minibatch: the method's kind, or its baseline hook (VCPO's
        minimum-variance baseline, with per-trajectory score norms)."""
        extra: dict[str, float] = {}

        def scores(needs_score_norms: bool) -> tuple[Tensor, Tensor | None]:
            if needs_score_norms:
                log_ratio, norms = self.trajectory_scores(batch, behavior)
                extra[f"{self.spec.name}/score_norm_mean"] = float(norms.sqrt().mean())
                return log_ratio, norms
            mask = batch.response_mask()
            return ((self._current_logprobs(batch) - behavior) * mask).sum(-1).double(), None

        adv = advantage_lib.method_advantages(
            self.spec,
            self.settings.advantage,
            batch.rewards,
            self.settings.method_settings,
            scores,
        )
        return adv, extra

    def _current_logprobs(self, batch: TrajectoryBatch) -> Tensor:
        """Detached current log-probs `[B, G, T]` (a baseline without score norms needs them)."""
        return batch_logprobs(
            self.model, batch, self.settings.logit_chunk, self.settings.groups_per_micro
        )

    def trajectory_scores(self, batch: TrajectoryBatch, behavior: Tensor) -> tuple[Tensor, Tensor]:
        """VCPO's inputs: log-ratios `s_i` and `||grad log pi_theta(y_i | x)||^2`, `[B, G]` each.

        Exact, by one forward and one backward per trajectory (`torch.autograd.grad`, the
        parameters' `.grad` untouched): `B G` extra backward passes per update, i.e. about one
        more full forward + backward of the minibatch in FLOPs, run one sequence at a time. The
        reference (`score_norms="per_trajectory"`) of `accumulate_with_baseline`'s in-backward norms.
        """
        b, g = batch.rewards.shape
        mask = batch.response_mask()
        log_ratio = torch.zeros(b, g, dtype=torch.float64)
        norms = torch.zeros(b, g, dtype=torch.float64)
        for i in range(b):
            one = batch.groups(i, i + 1)
            for j in range(g):
                with compute_autocast(self.model):
                    lp, _ = token_logprobs(
                        self.model,
                        one.input_ids[0, j : j + 1].long().to(self.device),
                        one.attention_mask()[0, j : j + 1].to(self.device),
                        one.prompt_len[0, j : j + 1].to(self.device),
                        batch.response_width,
                        self.settings.logit_chunk,
                    )
                m = mask[i, j].to(self.device)
                seq = (lp[0].float() * m).sum()
                grads = torch.autograd.grad(seq, self.params, allow_unused=True)
                norms[i, j] = sum(float(gr.float().pow(2).sum()) for gr in grads if gr is not None)
                beh = behavior[i, j].to(self.device)
                log_ratio[i, j] = float(((lp[0].detach().float() - beh) * m).sum())
        return log_ratio, norms

    def accumulate(
        self, batch: TrajectoryBatch, adv: Tensor, behavior: Tensor, version_lag: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Accumulate the minibatch gradient into `.grad`, micro-batch by micro-batch.

        Returns the detached current log-probs `[B, G, T]` (float32, CPU) and entropies.
        """
        num_groups = batch.num_groups
        mask = batch.response_mask()
        lps, ents = [], []
        for g0, g1 in self.micro_batches(batch):
            sub = batch.groups(g0, g1)
            lp, ent = micro_logprobs(
                self.model, sub, self.settings.logit_chunk, packed=self.settings.packed
            )
            sl = slice(g0, g1)
            loss, _ = policy_loss(
                lp,
                behavior[sl].to(self.device),
                adv[sl].to(self.device),
                mask[sl].to(self.device),
                self.settings.loss,
                version_lag=version_lag[sl].to(self.device),
            )
            # policy_loss normalises by 1/(T b G); scaled by b/B the sum is the 1/(T B G) one.
            (loss * (sub.num_groups / num_groups)).backward()
            lps.append(lp.detach().float().cpu())
            ents.append(ent.float().cpu())
        return torch.cat(lps), torch.cat(ents)

    def micro_batches(self, batch: TrajectoryBatch) -> list[tuple[int, int]]:
        """The `(start, stop)` group ranges of the micro-batches (`packing.micro_batch_ranges`)."""
        tokens = (batch.prompt_len + batch.response_len).sum(-1).tolist()
        return micro_batch_ranges(
            tokens, self.settings.groups_per_micro, self.settings.micro_batch_tokens
        )

    @staticmethod
    def _norms_in_backward(settings: LearnerSettings) -> bool:
        """The method's baseline needs score norms and gets them inside the backward."""
        baseline = get_method(settings.method).baseline
        return (
            baseline is not None
            and baseline.needs_score_norms
            and baseline.group_baseline is not None
            and settings.score_norms == "in_backward"
            and get_method(settings.method).uses_baseline(settings.advantage)
        )

    def accumulate_with_baseline(
        self, batch: TrajectoryBatch, behavior: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, dict[str, float]]:
        """The gradient under the method's baseline, its score norms read off each micro-batch's
        own backward (VCPO's minimum-variance baseline).

        One forward and one backward per micro-batch (`llm_runs.sample_norms.baseline_micro_batch`)
        instead of `trajectory_scores`' extra forward + backward per trajectory; the same
        gradient. Returns `(current [B, G, T], entropy [B, G, T], advantages [B, G], metrics)`.
        """
        from llm_runs.sample_norms import baseline_micro_batch

        baseline = self.spec.baseline
        assert baseline is not None and baseline.group_baseline is not None
        settings = self.settings.method_settings
        lps, ents, advs, norms = [], [], [], []
        for g0, g1 in self.micro_batches(batch):
            sub = batch.groups(g0, g1)
            lp, ent, adv, norm = baseline_micro_batch(
                self.model,
                sub,
                behavior[g0:g1],
                self.settings.loss,
                lambda r, s, n: baseline.group_baseline(r, s, n, settings),
                scale=sub.num_groups / batch.num_groups,
                chunk=self.settings.logit_chunk,
            )
            lps.append(lp.detach().float().cpu())
            ents.append(ent.float().cpu())
            advs.append(adv.cpu())
            norms.append(norm.cpu())
        norm = torch.cat(norms)
        metrics = {f"{self.spec.name}/score_norm_mean": float(norm.sqrt().mean())}
        return torch.cat(lps), torch.cat(ents), torch.cat(advs), metrics

    def gradient(
        self, batch: TrajectoryBatch, version: int
    ) -> tuple[dict[str, float], Tensor, Tensor]:
        """Zero the gradient and accumulate the minibatch's; return diagnostics and log-probs.

        Returns `(metrics, current_logprobs [B, G, T], behavior_logprobs [B, G, T])`.
        """
        behavior = batch.behavior_logprobs(self.settings.behavior_source).float()
        mask = batch.response_mask()
        lag = batch.version_lag(version)  # [B, G]: each group's own snapshot
        self.optimizer.zero_grad(set_to_none=True)
        if self._norms_in_backward(self.settings):
            current, entropy, adv, extra = self.accumulate_with_baseline(batch, behavior)
        else:
            adv, extra = self.advantages(batch, behavior)
            current, entropy = self.accumulate(batch, adv, behavior, lag)
        # the micro-batches' results come back on the CPU; the diagnostics are computed where the
        # batch is (the trainer keeps it on the CPU; a caller may hand one on the learner's GPU)
        current, entropy, adv = (t.to(mask.device) for t in (current, entropy, adv))
        current = masked_logprobs(current, mask)
        with torch.no_grad():
            _, diag = policy_loss(current, behavior, adv, mask, self.settings.loss, version_lag=lag)
        maskf = mask.float()
        tokens = maskf.sum().clamp(min=1)
        metrics = {k: float(v) for k, v in diag.items()}
        metrics.update(extra)
        metrics["policy/entropy"] = float((entropy * maskf).sum() / tokens)
        metrics["advantage/abs_mean"] = float(adv.abs().mean())
        return metrics, current, behavior

    # -- update ------------------------------------------------------------------------------

    def step(self, batch: TrajectoryBatch, version: int) -> dict[str, float]:
        """One optimizer update on `batch` (all its groups) by the learner at `version`."""
        t0 = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        metrics, current, behavior = self.gradient(batch, version)
        self.last_logprobs = current
        log_ratio = ((current - behavior) * batch.response_mask()).sum(-1).double()
        if self.spec.gradient_edit is not None:
            metrics.update(self._edit_gradient())
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.settings.grad_clip)
        metrics["optim/grad_norm"] = float(grad_norm)
        scale = 1.0
        if self.spec.step_scale is not None:
            scale = self.spec.step_scale.compute(log_ratio, self.settings.method_settings)
            metrics[self.spec.step_scale.metric] = scale
        base = [group["lr"] for group in self.optimizer.param_groups]
        for group in self.optimizer.param_groups:
            group["lr"] = group["lr"] * scale
        metrics["optim/lr"] = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        for group, lr in zip(self.optimizer.param_groups, base, strict=True):
            group["lr"] = lr
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - t0
        metrics["perf/learner_seconds"] = seconds
        metrics["perf/tokens_per_s"] = batch.num_tokens() / max(seconds, 1e-9)
        metrics["perf/peak_memory_gb"] = peak_memory_gib(self.device)
        return metrics

    def _edit_gradient(self) -> dict[str, float]:
        """Apply the method's gradient edit (GAC's projection) to `.grad`: in place, parameter by
        parameter, when the edit has that form (GAC's: one float32 copy of the previous gradient
        in its state, no flattened gradient); else on the flattened gradient."""
        edit = self.spec.gradient_edit
        assert edit is not None
        if edit.apply_in_place is not None:
            return edit.apply_in_place(
                self.params, self.method_state, self.settings.method_settings
            )
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = torch.cat([g.reshape(-1).float() for g in grads])
        projected, info = edit.apply(flat, self.method_state, self.settings.method_settings)
        if projected is not flat:
            offset = 0
            for p, g in zip(self.params, grads, strict=True):
                n = g.numel()
                p.grad = projected[offset : offset + n].view_as(g).to(g.dtype)
                offset += n
        return info


def masked_logprobs(current: Tensor, mask: Tensor) -> Tensor:
    """`current` `[B, G, T]` with 0 off the response `mask` (its padding), on `mask`'s device;
    the zero is made there too, so no CPU scalar meets a CUDA tensor."""
    current = current.to(mask.device)
    return torch.where(mask, current, torch.zeros((), dtype=current.dtype, device=mask.device))


def peak_memory_gib(device: torch.device) -> float:
    """Peak accelerator memory since the last reset (CUDA), else the process's peak RSS, GiB."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB
