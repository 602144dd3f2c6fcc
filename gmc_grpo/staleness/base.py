"""What every staleness schedule is and answers: `Schedule`, its items, and lag statistics.

A schedule decides which item the learner consumes at each step and which policy version
generated it. It is generic over what an item holds: the learner passes a `generate(version)`
callable that produces one item with the policy of that version (the current one), and gets back
`ScheduledBatch` records carrying the item, its behavior version and its realised lag.

`Schedule` is the base class of every schedule, the built-in ones and a user's (`docs/schedules.md`,
`examples/periodic_sync.py`). The learners ask it, never its name or its internals:

| question                                   | answer                                        |
|--------------------------------------------|-----------------------------------------------|
| is an item a whole batch or one group?     | `item` (`"batch"` or `"group"`)               |
| how many groups does one launch hold?      | `groups_per_item(groups_per_batch)`           |
| which items are launched and not consumed? | `pending_entries()` (`pending`: their number) |
| how many launches will the next call make? | `launches_ahead()` (a lower bound)            |
| each consumed item's lag                   | `ScheduledBatch.lag`, `realised_lags`         |
| the lags per update, per item or per group | `lags_per_batch`, `group_lags(B)`             |
| the unit of the lengths it reads           | `length_unit` (None: it reads none)           |
| resume                                     | `state_dict()`, `load_state_dict(state)`      |
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

T = TypeVar("T")

#: what one launch of a schedule produces: a whole batch of groups that share one behavior
#: version, or one group with its own version and lag
ITEM_KINDS: tuple[str, ...] = ("batch", "group")


@dataclass
class ScheduledBatch(Generic[T]):
    """An item (a batch, or one group) in a schedule.

    batch: what `generate` returned.
    behavior_version: learner version whose policy generated it (`mu = pi_{theta_v}`).
    launch_index: 0, 1, 2, ... in launch order.
    launch_time, ready_time: schedule clock values (fixed delay: the learner step).
    consumed_version: learner version that consumed it (set on consumption).
    """

    batch: T
    behavior_version: int
    launch_index: int
    launch_time: float
    ready_time: float
    consumed_version: int | None = None

    @property
    def lag(self) -> int:
        """Realised lag `consumed_version - behavior_version` (learner updates)."""
        if self.consumed_version is None:
            raise ValueError("lag is defined once the batch has been consumed")
        return self.consumed_version - self.behavior_version


def entry_state(entry: ScheduledBatch[Any]) -> dict[str, Any]:
    """The fields of `entry` as a dict, for `state_dict` (the stored item is kept as it is)."""
    # shallow on purpose: `dataclasses.asdict` would deep-copy the stored batches (at D = 512 and
    # paper shapes, gigabytes of tensors) and turn dataclass batches into dicts
    return {f.name: getattr(entry, f.name) for f in fields(entry)}


def entry_from_state(state: dict[str, Any]) -> ScheduledBatch[Any]:
    """The inverse of `entry_state`."""
    return ScheduledBatch(**state)


def chunks(lags: list[int], size: int) -> list[list[int]]:
    """`lags` cut into consecutive lists of `size` (one per learner update)."""
    return [lags[start : start + size] for start in range(0, len(lags), size)]


class Schedule(ABC, Generic[T]):
    """A staleness schedule: which item each learner update consumes, and its lag.

    To add a schedule, subclass this, set `item`, implement `next`, `pending_entries`,
    `state_dict` and `load_state_dict` (and `launches_ahead`, `length_unit` when they are not the
    defaults), hand every consumed item through `consume`, and register a `ScheduleSpec` that
    builds it (`gmc_grpo.staleness.register_schedule`; `examples/periodic_sync.py`).

    Attributes:
        item: `"batch"` (a launch is a whole batch of `B` groups sharing one behavior version) or
            `"group"` (a launch is one group with its own version and lag; one update then mixes
            lags). Decides what `generate` must return and how the learners join items.
        items_per_update: items consumed per learner update (`lags_per_batch` cuts by it).
        realised_lags: the lag of every consumed item, in consumption order.
    """

    item: ClassVar[str] = "batch"
    items_per_update: int = 1

    def __init__(self) -> None:
        self.realised_lags: list[int] = []

    # -- what a subclass implements ----------------------------------------------------------

    @abstractmethod
    def next(self, version: int, generate: Callable[[int], T]) -> list[ScheduledBatch[T]]:
        """The `items_per_update` items the learner at `version` consumes.

        `generate(version)` returns one item (a batch or a group, per `item`) from the current
        policy; the schedule calls it once per launch.
        """

    @abstractmethod
    def pending_entries(self) -> list[ScheduledBatch[T]]:
        """Every item launched and not consumed yet (behavior versions the learner must keep)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume; all values but the stored items JSON-serialisable."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`; refuse (ValueError) a state of other settings."""

    def launches_ahead(self) -> int:
        """A lower bound on the launches the next `next` call makes, all from the same version
        (a learner may generate that many at once). 0 when the schedule cannot say."""
        return 0

    @property
    def length_unit(self) -> str | None:
        """What one unit of the lengths it reads is (None: it reads no lengths)."""
        return None

    # -- provided ----------------------------------------------------------------------------

    def consume(self, entry: ScheduledBatch[T], version: int) -> ScheduledBatch[T]:
        """Mark `entry` consumed by the learner at `version` and record its lag."""
        entry.consumed_version = version
        self.realised_lags.append(entry.lag)
        return entry

    @property
    def pending(self) -> int:
        """Items launched and not yet consumed."""
        return len(self.pending_entries())

    @property
    def lags_per_batch(self) -> list[list[int]]:
        """The lags of each learner update's items, one list per update."""
        return chunks(self.realised_lags, self.items_per_update)

    def groups_per_item(self, groups_per_batch: int) -> int:
        """Groups one launch holds: the whole batch's `groups_per_batch`, or 1 for a group."""
        return 1 if self.item == "group" else groups_per_batch

    def group_lags(self, groups_per_batch: int) -> list[list[int]]:
        """The lag of every consumed group, one list per learner update (a batch item's lag is
        repeated for each of its `groups_per_batch` groups): the input of `lag_statistics`."""
        per_item = self.groups_per_item(groups_per_batch)
        return [[lag for lag in update for _ in range(per_item)] for update in self.lags_per_batch]


def lag_statistics(lags_per_batch: Sequence[Sequence[int]]) -> dict[str, float]:
    """Summary of realised lags, given per learner update (`[N][B_n]`, e.g. `lags_per_batch`).

    Over all `sum_n B_n` groups (the paper's averages over groups, §4.1):

    - `mean`: mean lag; `tau2`: mean squared lag; `tau4`: mean fourth power, the empirical
      `tau4_bar = (1/(N B)) sum_n sum_b (tau_n^(b))^4` of Theorem 1 (one run, not an
      expectation); `max`, `min`: extreme lags.

    Within-batch spread (0 for the fixed-delay and length-coupled schedules, whose batches share
    one lag):

    - `spread_std`: mean over batches of the population std of the batch's lags;
    - `spread_range`: mean over batches of `max - min`;
    - `mixed_fraction`: fraction of batches holding more than one lag.

    Plus `num_batches` and `num_groups`. Slice the input to leave out the warm-up (its first
    groups come from the initial policy).
    """
    if len(lags_per_batch) == 0 or any(len(batch) == 0 for batch in lags_per_batch):
        raise ValueError(
            "lag_statistics needs at least one batch and no empty batch, got "
            f"{len(lags_per_batch)} batches with sizes {[len(b) for b in lags_per_batch][:8]}; "
            "pass schedule.lags_per_batch after at least one step"
        )
    batches = [np.asarray(batch, dtype=np.float64) for batch in lags_per_batch]
    lags = np.concatenate(batches)
    return {
        "mean": float(lags.mean()),
        "tau2": float((lags**2).mean()),
        "tau4": float((lags**4).mean()),
        "max": float(lags.max()),
        "min": float(lags.min()),
        "spread_std": float(np.mean([batch.std() for batch in batches])),
        "spread_range": float(np.mean([batch.max() - batch.min() for batch in batches])),
        "mixed_fraction": float(np.mean([batch.max() > batch.min() for batch in batches])),
        "num_batches": float(len(batches)),
        "num_groups": float(lags.size),
    }
