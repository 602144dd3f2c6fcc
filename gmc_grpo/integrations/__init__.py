"""Adapters that run the core estimators inside existing distributed RL engines (docs/integrations.md).

- `gmc_grpo.integrations.trl`: `GMCGRPOTrainer`, a subclass of TRL's `GRPOTrainer` (TRL 1.16)
  that keeps each group's `G` completions together through TRL's shuffling and micro-batch
  splitting and replaces the token-level PPO loss by the core library's trajectory-level
  surrogate (`gmc_grpo.losses.policy_loss`). Importing it imports TRL; install with
  `pip install -e ".[trl]"` (in a clone).
- `gmc_grpo.integrations.trl_async`: `GMCAsyncGRPOTrainer`, a subclass of TRL's asynchronous
  `AsyncGRPOTrainer` (`trl.experimental.async_grpo`): whole groups per packed row, coefficients
  against the rollout workers' log-probs, stale samples kept and capped, each sample's lag logged.
  `gmc_grpo.integrations.trl_async_local` has CPU stand-ins for its vLLM server, NCCL weight
  transfer and FA3 tree attention.
- `gmc_grpo.integrations.verl`: policy losses registered in verl's `register_policy_loss`
  registry (verl 0.9.x) plus the step that computes the group-level coefficients where verl's
  batch still carries its group ids (`uid`) and both log-probs, switched on from verl's own config.
  `gmc_grpo.integrations.verl_plugin` is the `verl.plugins` entry point that verl loads in every
  process. Importing `gmc_grpo.integrations.verl` does not import verl: its pure-tensor parts
  (regrouping a flat batch by `uid`, the coefficients) work without it.
- `gmc_grpo.integrations.grouping`: regrouping flat rows by group id (shared by the adapters).

The core (`gmc_grpo.*` outside this folder) never imports these modules, TRL or verl.
"""
