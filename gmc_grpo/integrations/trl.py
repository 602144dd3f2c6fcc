"""GMC-GRPO (and TIC-GRPO, VCPO's truncated IS, plain IS) inside TRL's `GRPOTrainer`.

Targets TRL 1.16.0 (`trl/trainer/grpo_trainer.py`); other versions are accepted when the hooks
below exist, with a warning. Importing this module imports TRL; without it the import fails
with the extra to install (`pip install -e ".[trl]"` in a clone).

What TRL does (read from its source, 1.16.0) and what this subclass changes:

1. Sampling. `RepeatSampler(mini_repeat_count=G)` puts the `G` copies of a prompt on
   consecutive rows, and each process receives `per_device_train_batch_size *
   steps_per_generation` consecutive rows of the global generation batch (accelerate's batch
   sharding). When `per_device_train_batch_size` is a multiple of `G`, every process therefore
   holds whole groups, and `_generate_and_score_completions` returns them as consecutive rows.
   The subclass checks this at run time (the `G` rows of a group share their prompt tokens).
2. Shuffling and splitting. TRL's `_prepare_inputs` shuffles the generation batch row by row
   (`shuffle_sequence_dict`) and cuts it into `steps_per_generation` micro-batches
   (`split_tensor_dict`), which scatters a group over several micro-batches. The subclass
   shuffles whole groups instead (`shuffle_groups`: a random order of groups, rows inside a
   group kept together) and then cuts; with `per_device_train_batch_size % G == 0` every
   micro-batch holds whole groups. A `gmc_group_ids` column (`[N]`, globally unique per
   generation batch) travels with the rows and is checked by the loss.
3. Behavior log-probs. The trajectory log-ratio `s_i` (eq. 3) must use the policy that sampled
   the completions (Appendix B.1). TRL keeps `sampling_per_token_logps` (vLLM's, or a custom
   `rollout_func`'s, log-probs of the sampled tokens) and `old_per_token_logps` (the trainer's
   own forward pass at generation time, computed when the batch is consumed over several
   optimizer steps or when `vllm_importance_sampling_correction` is on). `behavior="auto"` takes
   the sampling log-probs when present (the generation engine is the behavior policy, stale or
   not), else the old log-probs, else the current log-probs detached: TRL omits the old ones
   only when every micro-batch of a generation is used within the optimizer step that generated
   it, so the current policy is the behavior policy and `s_i = 0`. TRL's own vLLM
   importance-sampling ratio (`importance_sampling_ratio`) is not applied: the trajectory ratio
   against the sampling log-probs already contains the engine mismatch.
4. Loss. `_compute_loss` is replaced by the core surrogate `gmc_grpo.losses.policy_loss` on the
   micro-batch reshaped to `[B, G, T]`. With the paper's aggregation (`1/(T B G)`, eq. 2 and 9)
   `T` is `max_completion_length` (or the padded length if larger), each micro-batch divides by
   its own `T B G` and by the gradient-accumulation steps, and DDP's gradient average over
   processes completes the mean: the optimizer step sees `1/(T * all trajectories of the step)`.
   The coefficients are recomputed from the current log-probs at every call (several optimizer
   steps per generation: `num_iterations > 1` or `steps_per_generation > gradient_accumulation`).

Several processes: coefficients need only the rows of a group, which never leave their process
(point 1), so no extra communication is needed. Each process's micro-batch has the same number of
rows, which makes DDP's average the global `1/(T B G)`. Not exercised in our tests (CPU, one
process); the sharding arithmetic is.

Our interpretation, where TRL offers more than the paper: TRL's `beta` (KL to a reference),
entropy bonus, `top_entropy_quantile` and `off_policy_mask_threshold` have no counterpart in
the paper's estimator (Appendix B.1 uses no KL), so the start-up check refuses them rather than
silently ignoring them. `loss_type`, `epsilon*`, `importance_sampling_level`, `delta` and the
vLLM IS settings are unused (the core config decides). Advantages: `advantage="paper"` uses the
paper's kind for the method (its `gmc_grpo.methods` spec: leave-one-out for GMC, TIC and
IS), obtained from TRL's centred advantages (`scale_rewards="none"`) by the exact identity
`A_loo = G/(G-1) (r_i - r_bar)`; `"trl"` keeps TRL's advantages as they are.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import torch
from torch import Tensor

from gmc_grpo.losses import PolicyLossConfig, policy_loss
from gmc_grpo.methods import get_method, trajectory_method_names

try:
    import trl
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import (
        split_pixel_values_by_grid,
        split_tensor_dict,
        unsplit_pixel_values_by_grid,
    )
except ImportError as exc:  # pragma: no cover - exercised by a test that hides trl
    raise ImportError(
        "gmc_grpo.integrations.trl needs TRL (tested with trl==1.16.0): pip install -e '.[trl]' in a gmc-grpo clone"
    ) from exc

TARGET_TRL_VERSION = "1.16.0"
# The GRPOTrainer methods this subclass overrides or calls (TRL 1.16.0).
_TRL_HOOKS = (
    "_prepare_inputs",
    "_compute_loss",
    "_generate_and_score_completions",
    "_get_per_token_logps_and_entropies",
)
# Inputs that TRL forwards to the model next to the token ids (multimodal models).
_FORWARD_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)
GROUP_IDS_KEY = "gmc_group_ids"

BehaviorSource = Literal["auto", "sampling", "old"]
AdvantageChoice = Literal["paper", "trl", "centered", "loo", "std"]


def _check_trl_version() -> None:
    missing = [name for name in _TRL_HOOKS if not hasattr(GRPOTrainer, name)]
    if missing:
        raise ImportError(
            f"gmc_grpo.integrations.trl targets trl=={TARGET_TRL_VERSION}; the installed "
            f"trl=={trl.__version__} lacks GRPOTrainer.{', '.join(missing)}. "
            f"Install trl=={TARGET_TRL_VERSION}."
        )
    if trl.__version__ != TARGET_TRL_VERSION:
        warnings.warn(
            f"gmc_grpo.integrations.trl was tested with trl=={TARGET_TRL_VERSION}, found "
            f"trl=={trl.__version__}; the hooks it overrides exist, but check the results.",
            stacklevel=2,
        )


_check_trl_version()


@dataclass(frozen=True)
class GMCTRLConfig:
    """Settings of the adapter (everything TRL's `GRPOConfig` does not express).

    loss: the core `PolicyLossConfig`; `method` must be a trajectory method (`gmc`, `tic`,
        `vcpo`, `is`, or a registered method's: `get_method(name).loss_config(settings)`). Default: GMC with `eps = 0.28` (Appendix B.1) and the paper's `1/(T B G)`;
        `max_length=None` means `T = max_completion_length` of the `GRPOConfig`.
    behavior: which recorded log-probs are the behavior policy `mu` (module docstring, point 3):
        `auto`, `sampling` (require the generation engine's log-probs) or `old` (the trainer's
        log-probs at generation time).
    advantage: `paper` (the method's kind in its registry spec), `trl` (TRL's advantages as
        computed), or a kind `centered` / `loo` / `std`; every kind but `trl` is checked against
        `scale_rewards` at start-up (`centered`/`loo`: `"none"`, `std`: `"group"`).
    """

    loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    behavior: BehaviorSource = "auto"
    advantage: AdvantageChoice = "paper"

    def __post_init__(self) -> None:
        if not self.loss.trajectory_level:
            allowed = list(trajectory_method_names())
            raise ValueError(
                f"GMCTRLConfig.loss.method must be a trajectory method {allowed}, "
                f"got {self.loss.method!r} (use TRL's own loss_type for token-level GRPO)"
            )
        if self.behavior not in get_args(BehaviorSource):
            raise ValueError(
                f"GMCTRLConfig.behavior must be one of {get_args(BehaviorSource)}, got {self.behavior!r}"
            )
        if self.advantage not in get_args(AdvantageChoice):
            raise ValueError(
                f"GMCTRLConfig.advantage must be one of {get_args(AdvantageChoice)}, "
                f"got {self.advantage!r}"
            )

    @property
    def advantage_kind(self) -> str:
        """The advantage kind actually used (`paper` resolved), or `trl`."""
        return get_method(self.loss.method).advantage_kind(self.advantage)


def check_grpo_config(args: GRPOConfig, config: GMCTRLConfig) -> None:
    """Refuse TRL settings the adapter cannot honour, before any model or data is touched.

    Raises `ValueError` naming the setting, its value and what to set instead.
    """
    group = args.num_generations
    if group is None or group < 2:
        raise ValueError(
            f"GRPOConfig.num_generations (G) must be >= 2 for group methods, got {group}"
        )
    per_device = args.per_device_train_batch_size
    if per_device % group != 0:
        raise ValueError(
            f"GRPOConfig.per_device_train_batch_size={per_device} must be a multiple of "
            f"num_generations={group}: each micro-batch must hold whole groups so that GMC's "
            f"group mass can be computed (try per_device_train_batch_size={group * max(1, per_device // group)})"
        )
    if getattr(args, "eval_strategy", "no") not in ("no", None):
        eval_group = args.num_generations_eval or group
        if args.per_device_eval_batch_size % eval_group != 0:
            raise ValueError(
                f"GRPOConfig.per_device_eval_batch_size={args.per_device_eval_batch_size} must be a "
                f"multiple of num_generations_eval={eval_group} (whole groups in every eval batch)"
            )
    unsupported = {
        "beta": (args.beta, 0.0, "the paper's estimator has no KL term (Appendix B.1)"),
        "top_entropy_quantile": (
            args.top_entropy_quantile,
            1.0,
            "token masks break the trajectory ratio",
        ),
        "off_policy_mask_threshold": (args.off_policy_mask_threshold, None, "GMC caps instead"),
        "entropy_coef": (args.entropy_coef, 0.0, "no entropy bonus in the paper's estimator"),
        "use_adaptive_entropy": (args.use_adaptive_entropy, False, "no entropy bonus"),
    }
    for name, (value, wanted, why) in unsupported.items():
        if value != wanted:
            raise ValueError(
                f"GRPOConfig.{name}={value!r} is not supported by GMCGRPOTrainer ({why}); set {wanted!r}"
            )
    kind = config.advantage_kind
    if kind != "trl":
        if args.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                f"advantage={config.advantage!r} ({kind}) needs GRPOConfig.multi_objective_aggregation="
                f"'sum_then_normalize', got {args.multi_objective_aggregation!r} (or use advantage='trl')"
            )
        wanted_scale = "group" if kind == "std" else "none"
        if args.scale_rewards != wanted_scale:
            raise ValueError(
                f"advantage={config.advantage!r} ({kind}) needs GRPOConfig.scale_rewards="
                f"{wanted_scale!r}, got {args.scale_rewards!r} (or use advantage='trl')"
            )
    if config.behavior == "sampling" and not args.use_vllm:
        warnings.warn(
            "GMCTRLConfig.behavior='sampling' without use_vllm: a rollout_func must return "
            "'logprobs', otherwise the loss stops with an error",
            stacklevel=2,
        )


def group_row_order(
    num_rows: int, group_size: int, generator: torch.Generator | None = None
) -> Tensor:
    """A random order of whole groups: `[N]` row indices, each group's `G` rows kept together.

    Args:
        num_rows: `N`, a multiple of `group_size`; groups are rows `[k G, (k+1) G)`.
        group_size: `G`.
        generator: optional RNG (default: torch's global RNG, as TRL's row shuffle uses).
    """
    if num_rows % group_size != 0:
        raise ValueError(f"{num_rows} rows do not form whole groups of G={group_size}")
    order = torch.randperm(num_rows // group_size, generator=generator)
    return (order.unsqueeze(1) * group_size + torch.arange(group_size)).reshape(-1)


def shuffle_groups(
    batch: dict[str, Any], group_size: int, generator: torch.Generator | None = None
) -> dict[str, Any]:
    """Shuffle a TRL batch dict by whole groups (our replacement for `shuffle_sequence_dict`).

    Tensors with a batch dimension and lists are permuted along the first dimension; 0-dim
    tensors (`num_items_in_batch`) and `None` are kept. `[N, ...] -> [N, ...]`.
    """
    first = next(
        v for v in batch.values() if v is not None and not (isinstance(v, Tensor) and v.dim() == 0)
    )
    order = group_row_order(len(first), group_size, generator)

    def permute(value: Any) -> Any:
        if value is None or (isinstance(value, Tensor) and value.dim() == 0):
            return value
        if isinstance(value, Tensor):
            return value[order.to(value.device)]
        return [value[i] for i in order.tolist()]

    return {key: permute(value) for key, value in batch.items()}


def check_whole_groups(group_ids: Tensor, group_size: int) -> None:
    """Raise unless `group_ids` (`[N]`) is made of whole groups: `G` equal consecutive ids per group."""
    if group_ids.numel() % group_size != 0:
        raise RuntimeError(
            f"micro-batch of {group_ids.numel()} rows does not hold whole groups of G={group_size}"
        )
    blocks = group_ids.reshape(-1, group_size)
    if (
        not bool((blocks == blocks[:, :1]).all())
        or blocks[:, 0].unique().numel() != blocks.shape[0]
    ):
        raise RuntimeError(
            "a micro-batch does not hold whole, contiguous groups: the group layout was changed "
            "between generation and loss (check per_device_train_batch_size % num_generations == 0)"
        )


def grouped_policy_loss(
    per_token_logps: Tensor,
    behavior_logps: Tensor,
    advantages: Tensor,
    mask: Tensor,
    group_size: int,
    config: PolicyLossConfig,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The core surrogate on a flat TRL micro-batch whose groups are consecutive rows.

    Args:
        per_token_logps: `[N, T]` current log-probs (with grad), `N = B G`.
        behavior_logps: `[N, T]` behavior log-probs.
        advantages: `[N]`.
        mask: `[N, T]` loss mask.
        group_size: `G`.
        config: the core config (its `max_length` already resolved).
    Returns:
        `(loss, diagnostics)` of `gmc_grpo.losses.policy_loss` on the `[B, G, T]` view.
    """
    rows, length = per_token_logps.shape
    if rows % group_size != 0:
        raise RuntimeError(
            f"micro-batch of {rows} rows does not hold whole groups of G={group_size}"
        )
    shape = (rows // group_size, group_size, length)
    return policy_loss(
        per_token_logps.reshape(shape),
        behavior_logps.reshape(shape),
        advantages.reshape(shape[:2]),
        mask.reshape(shape),
        config,
    )


def _local_group_ids(
    prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, offset: int
) -> Tensor:
    """`[N]` group ids for consecutive rows; checks that each group's rows share their prompt."""
    rows = prompt_ids.shape[0]
    if rows % group_size != 0:
        raise RuntimeError(
            f"this process received {rows} completions, not whole groups of G={group_size}: "
            "per_device_train_batch_size must be a multiple of num_generations"
        )
    ids = prompt_ids.masked_fill(prompt_mask == 0, -1).reshape(rows // group_size, group_size, -1)
    if not bool((ids == ids[:, :1]).all()):
        raise RuntimeError(
            "consecutive blocks of G completions do not share their prompt: TRL's sampler layout "
            "(RepeatSampler, G copies of a prompt on consecutive rows) is not what this adapter "
            f"expects (trl=={trl.__version__}, tested {TARGET_TRL_VERSION})"
        )
    return (
        torch.arange(rows // group_size, device=prompt_ids.device).repeat_interleave(group_size)
        + offset
    )


class GMCGRPOTrainer(GRPOTrainer):
    """TRL's `GRPOTrainer` with group-preserving batches and the core trajectory-level loss.

    Use it like `GRPOTrainer`, with one extra keyword `gmc_config` (`GMCTRLConfig`). See the
    module docstring for what changes and the settings that must hold (checked at start-up).
    """

    def __init__(self, *args: Any, gmc_config: GMCTRLConfig | None = None, **kwargs: Any) -> None:
        self.gmc_config = gmc_config if gmc_config is not None else GMCTRLConfig()
        early_args = kwargs.get("args", args[2] if len(args) > 2 else None)
        if isinstance(early_args, GRPOConfig):
            check_grpo_config(early_args, self.gmc_config)  # before the model is built
        super().__init__(*args, **kwargs)
        check_grpo_config(self.args, self.gmc_config)
        if self.use_vllm and self.vllm_importance_sampling_correction:
            warnings.warn(
                "vllm_importance_sampling_correction=True: TRL computes an extra forward pass for its "
                "token-level IS ratio, which GMCGRPOTrainer does not use (the trajectory ratio against "
                "vLLM's log-probs replaces it); set it to False to save the pass",
                stacklevel=2,
            )

    # -- batches ----------------------------------------------------------------------------

    def _group_size(self) -> int:
        return self.num_generations if self.model.training else self.num_generations_eval

    def _with_group_ids(self, batch: dict[str, Any], group_size: int) -> dict[str, Any]:
        rows = batch["prompt_ids"].shape[0]
        offset = self.accelerator.process_index * (rows // group_size)
        batch[GROUP_IDS_KEY] = _local_group_ids(
            batch["prompt_ids"], batch["prompt_mask"], group_size, offset
        )
        return batch

    def _prepare_inputs(self, generation_batch: Any) -> dict[str, Any]:
        """TRL's buffering of generation batches, with a group-preserving shuffle.

        Same schedule as TRL 1.16 (generate every `steps_per_generation * num_iterations`
        steps, serve slice `step % steps_per_generation`); only the shuffle differs.
        """
        group_size = self._group_size()
        if not self.model.training:
            return self._with_group_ids(
                self._generate_and_score_completions(generation_batch), group_size
            )
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every == 0 or self._buffered_inputs is None:
            batch = self._generate_and_score_completions(generation_batch)
            batch = self._with_group_ids(batch, group_size)
            batch = split_pixel_values_by_grid(batch)
            batch = shuffle_groups(batch, group_size)
            chunks = split_tensor_dict(batch, self.args.steps_per_generation)
            self._buffered_inputs = [unsplit_pixel_values_by_grid(chunk) for chunk in chunks]
        return self._buffered_inputs[self._step % self.args.steps_per_generation]

    # -- loss -------------------------------------------------------------------------------

    def _behavior_logps(
        self, inputs: dict[str, Any], per_token_logps: Tensor, mask: Tensor
    ) -> Tensor:
        """`[N, T]` log-probs of the behavior policy (module docstring, point 3)."""
        sampling = inputs.get("sampling_per_token_logps")
        old = inputs.get("old_per_token_logps")
        fallback = old if old is not None else per_token_logps.detach()
        if self.gmc_config.behavior == "old":
            return fallback
        if sampling is None:
            if self.gmc_config.behavior == "sampling":
                raise RuntimeError(
                    "GMCTRLConfig.behavior='sampling' but the batch has no sampling log-probs "
                    "(use_vllm=True, or a rollout_func returning 'logprobs')"
                )
            return fallback
        # vLLM reports NaN where it could not score a token (TRL keeps them as NaN); such a
        # token gets the fallback log-prob, i.e. no correction, as TRL does for its own ratio.
        bad = torch.isnan(sampling) & mask.bool()
        return torch.where(bad, fallback, sampling) if bool(bad.any()) else sampling

    def _core_config(self, length: int) -> PolicyLossConfig:
        config = self.gmc_config.loss
        if config.aggregation == "paper" and config.max_length is None:
            limit = self.max_completion_length or length
            return dataclasses.replace(config, max_length=max(limit, length))
        return config

    def _advantages(self, advantages: Tensor, group_size: int) -> Tensor:
        if advantages.dim() != 1:
            raise RuntimeError(
                f"expected one advantage per completion [N], got shape {tuple(advantages.shape)}"
            )
        if self.gmc_config.advantage_kind == "loo":
            return loo_from_centered(advantages, group_size)
        return advantages

    def _compute_loss(self, model: torch.nn.Module, inputs: dict[str, Any]) -> Tensor:
        mode = "train" if self.model.training else "eval"
        group_size = self._group_size()
        check_whole_groups(inputs[GROUP_IDS_KEY], group_size)
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        mask = (
            completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        )
        per_token_logps, entropies, aux_loss = self._get_per_token_logps_and_entropies(
            model,
            torch.cat([prompt_ids, completion_ids], dim=1),
            torch.cat([prompt_mask, completion_mask], dim=1),
            completion_ids.size(1),
            compute_entropy=True,
            compute_aux_loss=self.aux_loss_enabled,
            **{key: inputs.get(key) for key in _FORWARD_KEYS},
        )
        behavior = self._behavior_logps(inputs, per_token_logps, mask)
        loss, diagnostics = grouped_policy_loss(
            per_token_logps,
            behavior,
            self._advantages(inputs["advantages"], group_size),
            mask,
            group_size,
            self._core_config(completion_ids.size(1)),
        )
        accumulation = self.current_gradient_accumulation_steps if mode == "train" else 1
        policy_value = loss.detach()
        loss = loss / accumulation
        if self.aux_loss_enabled and aux_loss is not None:
            loss = loss + self.router_aux_loss_coef * aux_loss / accumulation
        self._log_gmc_metrics(mode, policy_value, diagnostics, entropies, mask)
        return loss

    def _log_gmc_metrics(
        self,
        mode: str,
        policy_value: Tensor,
        diagnostics: dict[str, Tensor],
        entropies: Tensor,
        mask: Tensor,
    ) -> None:
        device = self.accelerator.device
        values = {"policy_loss": policy_value, **{f"gmc/{k}": v for k, v in diagnostics.items()}}
        for name, value in values.items():
            gathered = self.accelerator.gather(value.detach().float().reshape(1).to(device))
            self._metrics[mode][name].append(gathered.mean().item())
        maskf = mask.float()
        zero = torch.zeros((), device=entropies.device)
        entropy = torch.where(mask.bool(), entropies.detach().float(), zero)
        totals = torch.stack([entropy.sum(), maskf.sum()])
        totals = self.accelerator.reduce(totals, reduction="sum")
        self._metrics[mode]["entropy"].append((totals[0] / totals[1].clamp(min=1.0)).item())


def loo_from_centered(centered: Tensor, group_size: int) -> Tensor:
    """Leave-one-out advantages from centred ones: `A_loo = G/(G-1) (r_i - r_bar)` (exact).

    `[...] -> [...]`; the identity `r_i - (1/(G-1)) sum_{j != i} r_j = G/(G-1) (r_i - r_bar)`.
    """
    if group_size < 2:
        raise ValueError(f"group size must be >= 2, got {group_size}")
    return centered * (group_size / (group_size - 1))


__all__ = [
    "GROUP_IDS_KEY",
    "TARGET_TRL_VERSION",
    "GMCGRPOTrainer",
    "GMCTRLConfig",
    "check_grpo_config",
    "check_whole_groups",
    "group_row_order",
    "grouped_policy_loss",
    "loo_from_centered",
    "shuffle_groups",
]
