"""How many responses a `toy_mdps.mdp.TokenMDP` enumerates, and the names a toy config may
give its MDP and policy: the part of the MDP that the configs check, free of torch.

`toy_mdps.problem` checks a toy config's MDP fields with these before anything imports torch,
so that `gmc-grpo toy train` and `toy sweep` refuse a bad value in a fraction of a second
(issue 36: a refusal used to wait 3-6 s for torch). `toy_mdps.mdp` re-exports the counts and
`REWARD_KINDS`; `POLICY_NAMES` are the keys of `toy_mdps.policies.POLICY_CLASSES` (a test keeps
the two equal).
"""

from __future__ import annotations

from typing import Literal, get_args

RewardKind = Literal["pattern", "length"]
REWARD_KINDS: tuple[str, ...] = get_args(RewardKind)

# Enumeration guard: beyond this many responses in total the dense tables stop being "small".
MAX_RESPONSES = 2_000_000


def num_responses_per_prompt(vocab_size: int, max_length: int) -> int:
    """`sum_{l=0}^{T} (V-1)^l`: responses of one prompt (EOS-terminated plus truncated)."""
    return sum((vocab_size - 1) ** l for l in range(max_length + 1))


def num_responses_up_to(num_prompts: int, vocab_size: int, max_length: int, cap: int) -> int:
    """`K * num_responses_per_prompt(V, T)` when it is at most `cap`, else a number above `cap`:
    the sum stops once past it, so `max_length = 100000` costs a few steps, not a sum of
    100,001 huge integers (which hung `toy train --max-length 100000`)."""
    total, term = 0, num_prompts
    for _ in range(max_length + 1):
        total += term
        if total > cap:
            return cap + 1
        term *= vocab_size - 1
        if term == 0:
            break
    return total


#: the policy classes a toy config may name (`toy_mdps.policies.POLICY_CLASSES`' keys)
POLICY_NAMES: tuple[str, ...] = ("tabular", "loglinear")
