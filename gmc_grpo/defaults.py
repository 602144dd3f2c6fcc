"""The paper's hyperparameters and the baselines' published constants, each with its source.

Plain numbers, no imports: every config of every track takes its defaults from here, so a value
and its source are written once.
"""

from __future__ import annotations

# The paper's eps: Appendix B.1, "TIC-GRPO and GMC-GRPO use eps_high = 0.28", i.e. the cap
# 1 + eps = 1.28 of TIC's trajectory clip (§4.3) and GMC's group mass (eq. 9, Prop. 2). Every
# default eps of every track and every "the paper's eps" refers to this one name; the JSON
# recipes write the number itself (they are data), and a test checks they equal it
# (tests/core/test_core_defaults.py).
PAPER_EPS = 0.28
# Appendix B.1: vanilla GRPO's two-sided token clip, eps = 0.2 (also GAC's base loss; A-3PO's
# value is our choice, the paper does not give one).
TOKEN_CLIP = 0.2
# VCPO's sequence-level truncation constant c (its public code: c = 8).
VCPO_TRUNCATION = 8.0
# VCPO's reference effective sample size of its step-size rule (its public code: 1).
VCPO_RHO_REF = 1.0
# GAC's cosine thresholds (Appendix B.1): no change below 0.05, the parallel component removed
# entirely above 0.30.
GAC_LOW = 0.05
GAC_HIGH = 0.30
# A-3PO masks tokens whose proximal-to-behavior ratio exceeds 5 (AReaL's default).
A3PO_MASK_THRESHOLD = 5.0

# Seeds are not hyperparameters: every random stream comes from `gmc_grpo.seeding`.

# Appendix B.1, the simulated asynchronous pipeline: `tau_ready = tau_launch + lambda L` with
# lambda = 28, and at most 400 launches per warm-up or refill.
PAPER_LAMBDA = 28.0
PAPER_MAX_LAUNCHES = 400
# Appendix B.1: 8 prompts (groups) per rollout mini-batch, 8 responses per prompt.
PAPER_GROUPS_PER_BATCH = 8
# Rollout workers of the worker schedule (§2.2): ours, the paper does not give their number.
DEFAULT_NUM_WORKERS = 16
