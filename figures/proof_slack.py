"""Where the proof loses: the decades lost at each step of the §4.2 chain, per tracked run.

`plot_proof_slack(slacks, ax=None)` draws what `evidence.slack.chain_slack` computes (one entry per
tracked GMC or TIC run), in two panels:

- left: per step of the chain (Proposition 1's bias half, the removed-mass step, the KL drift
  step, the drift with Proposition 1's `M`, the pathwise factor of the squaring) and Proposition 1
  alone, the decades `log10(larger side / smaller side)` of every run, one dot per run coloured by
  method, with the median as a bar;
- right: per run, the decades of steps 1-5 stacked (the chain's total), beside the run-level
  ratio of the theorem's delay term to the measured `T^2 ||b_n||^2` (black tick).

Steps a run cannot measure (no group capped: nothing removed) are left out of that run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from figures.common import panel_axes
from figures.style import method_color, method_label

# step keys and short labels, in the chain's order (evidence.slack.STEPS and its SECOND_MOMENT)
STEPS = (
    ("bias", "1. bias\n||b|| <= K_b E[m]"),
    ("removed_mass", "2. removed mass\nE[m] <= KL/den"),
    ("kl", "3. KL drift\nKL <= (TL/2)||dθ||²"),
    ("drift", "4. drift\n||dθ||² <= η²τ²M"),
    ("pathwise", "5. squaring\n||dθ||² <= η²τ²P"),
)
SECOND_MOMENT = ("second_moment", "Prop. 1\nE||g||² <= M")
STACK_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00")


def plot_proof_slack(slacks: Sequence[dict[str, Any]], ax: Any = None) -> Any:
    """Both panels (module docstring); `ax`: None or two axes. Returns the figure."""
    if not slacks:
        raise ValueError("no chain slack to draw: no tracked GMC or TIC run with stale steps")
    height = max(4.4, 0.11 * len(slacks) + 1.2)  # one readable bar per run
    fig, (left, right) = panel_axes(2, ax, width=6.4, height=height)
    keys = [*STEPS, SECOND_MOMENT]
    for i, (key, _) in enumerate(keys):
        values = [(s["decades"][key], s["method"]) for s in slacks if s["decades"][key] is not None]
        for j, (v, method) in enumerate(values):
            offset = (j / max(len(values) - 1, 1) - 0.5) * 0.5
            left.plot(i + offset, v, "o", ms=3.5, color=method_color(method), alpha=0.8)
        if values:
            ordered = sorted(v for v, _ in values)
            median = ordered[len(ordered) // 2]
            left.plot([i - 0.35, i + 0.35], [median, median], color="k", lw=2)
    left.set_xticks(range(len(keys)))
    left.set_xticklabels([label for _, label in keys], fontsize=6)
    left.set_ylabel("decades lost (log10 of larger / smaller side)", fontsize=7)
    left.set_title("each step of the §4.2 chain, every tracked run", fontsize=8)
    left.grid(alpha=0.3, axis="y")
    for method in sorted({s["method"] for s in slacks}):
        left.plot([], [], "o", color=method_color(method), label=method_label(method))
    left.plot([], [], color="k", lw=2, label="median")
    left.legend(fontsize=6, loc="upper left")
    rows = sorted(slacks, key=lambda s: (s["method"], s["run"]))
    for y, s in enumerate(rows):
        start = 0.0
        for (key, _), color in zip(STEPS, STACK_COLORS, strict=True):
            v = s["decades"][key]
            if v is None:
                continue
            right.barh(y, v, left=start, color=color, height=0.7)
            start += v
        ratio = s.get("run_delay_ratio")
        if ratio:
            right.plot(math.log10(ratio), y, "|", color="k", ms=9, mew=2)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color=color, label=label.split("\n")[0])
        for (_, label), color in zip(STEPS, STACK_COLORS, strict=True)
    ]
    handles.append(
        Line2D([], [], marker="|", ls="", color="k", ms=9, mew=2, label="theorem delay / measured")
    )
    right.set_yticks(range(len(rows)))
    right.set_yticklabels([s["run"][:48] for s in rows], fontsize=5)
    right.set_ylim(-0.6, len(rows) - 0.4)
    right.set_xlabel("decades (steps 1-5 stacked)", fontsize=7)
    right.set_title("per run: where the delay term's decades come from", fontsize=8)
    right.legend(handles=handles, fontsize=6, loc="upper right", framealpha=0.9)
    right.grid(alpha=0.3, axis="x")
    fig.suptitle("Where the proof loses (evidence.slack)", fontsize=10)
    fig.tight_layout()
    return fig
