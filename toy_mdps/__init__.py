"""toy_mdps: small autoregressive token MDPs with exact J, grad J and KL.

Every estimator's bias and second moment is measured against the exact gradient obtained by
enumerating all responses (`gmc-grpo toy ...`). Public API (`docs/DESIGN.md`): `TokenMDP`,
`TokenMDP.random_parameters`, `exact_objective`, `exact_gradient`, `exact_kl`; the estimator
statistics live in `toy_mdps.statistics`, the sweep in `toy_mdps.sweep`, the
asynchronous learners in `toy_mdps.train`.

The names are imported lazily (PEP 562) so that `gmc-grpo toy --help` does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gmc_grpo.lazy import lazy_attributes

if TYPE_CHECKING:
    from toy_mdps.enumeration import exact_gradient, exact_kl, exact_objective
    from toy_mdps.mdp import TokenMDP

__all__ = ["TokenMDP", "exact_gradient", "exact_kl", "exact_objective"]

_LAZY = {
    "TokenMDP": "toy_mdps.mdp",
    "exact_gradient": "toy_mdps.enumeration",
    "exact_kl": "toy_mdps.enumeration",
    "exact_objective": "toy_mdps.enumeration",
}


__getattr__ = lazy_attributes("toy_mdps", _LAZY)
