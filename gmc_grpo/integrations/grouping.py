"""Finding the groups of a flat batch whose rows an engine has reordered (shared by the adapters).

Engines hand the loss flat rows: verl reorders them (`balance_batch`, dynamic batch sizes), TRL's
asynchronous trainer packs them into rows of a prefix tree. Each row carries a group id; these
helpers regroup the rows so that the core estimators, which take `[B, G]`, see whole groups.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch
from torch import Tensor


def group_rows(uids: Sequence[Hashable]) -> list[Tensor]:
    """Row indices of every group, in order of first appearance.

    Args:
        uids: `[N]` group id of each row (verl's `non_tensor_batch["uid"]`, a numpy object array
            of strings; anything hashable works). Rows of a group may be anywhere in the batch.
    Returns:
        one `LongTensor [G_b]` per group (rows in increasing order).
    """
    rows: dict[Hashable, list[int]] = {}
    for row, uid in enumerate(list(uids)):
        rows.setdefault(uid, []).append(row)
    return [torch.tensor(r, dtype=torch.long) for r in rows.values()]


def groups_by_size(groups: list[Tensor]) -> dict[int, Tensor]:
    """Groups of equal size stacked: `{G: LongTensor [B_G, G]}` (an engine may drop rows, so
    group sizes can differ; the core takes one `[B, G]` tensor per size)."""
    by_size: dict[int, list[Tensor]] = {}
    for g in groups:
        by_size.setdefault(int(g.numel()), []).append(g)
    return {size: torch.stack(gs) for size, gs in by_size.items()}


__all__ = ["group_rows", "groups_by_size"]
