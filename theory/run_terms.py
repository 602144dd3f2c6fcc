"""Theorems 1-2 at a run's constants: numbers in, numbers out (no record is read here).

`theorem_at_constants(kind, constants)` evaluates `theory.bounds.theorem_terms` with both
constants (`CONSTANTS`: the paper's 8 of Proposition 1, our 2) at the constants a run recorded
(`constants`: the dict `toy_mdps.train.run_records.run_constants` returns, `T, vocab_size, R, L,
log_C, eta, N, eps, tau4, J0`); `coverage(log C)` is `C` with `log C` capped before `exp`. The
evidence layer (`evidence.measured`) sets these bounds beside the measurements, and the toy
track's GMC/TIC comparison (`toy_mdps.train.analysis`) reads the whole bound of each run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from theory.bounds import theorem_terms

# `np.exp` overflows above log(max float64) = 709.78: `log C` is capped here before `exp`. No toy
# run comes near it (the largest log C of the shipped quick experiments is about 7); a run above it
# would have its `C`,
# and with it the bound (which grows with log C), understated: the cap can only make a bound
# smaller, never hide a refutation.
LOG_C_OVERFLOW_CAP = 700.0
CONSTANTS = ("paper", "ours")


def coverage(log_c: ArrayLike) -> np.ndarray:
    """`C = exp(log C)`, with `log C` capped at `LOG_C_OVERFLOW_CAP` (see there)."""
    return np.exp(np.minimum(np.asarray(log_c, dtype=np.float64), LOG_C_OVERFLOW_CAP))


def theorem_at_constants(kind: str | None, constants: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`{constant: Theorem 1 (kind "gmc") / 2 ("tic") terms as a dict}` at a run's `constants`,
    for both `CONSTANTS`; empty for a method without a theorem (`kind` None) or without `eps`."""
    c = constants
    if kind is None or c["eps"] is None:
        return {}
    return {
        const: theorem_terms(
            kind,
            T=c["T"],
            vocab_size=c["vocab_size"],
            R=c["R"],
            C=float(coverage(c["log_C"])),
            L=c["L"],
            eta=c["eta"],
            N=c["N"],
            eps=c["eps"],
            tau4=c["tau4"],
            objective_gap=c["R"] - c["J0"],
            constant=const,
        ).as_dict()
        for const in CONSTANTS
    }
