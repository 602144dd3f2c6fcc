"""The module verl loads to enable GMC: the `verl.plugins` entry point of gmc-grpo.

`pip install -e ".[verl]"` (in a clone) declares the entry point `gmc = gmc_grpo.integrations.verl_plugin`
(group `verl.plugins`). verl 0.9 loads that group at `import verl` in every process (driver,
trainer, actor workers; `VERL_USE_EXTERNAL_PLUGINS`, default `auto`), which is where the
policy-loss registry and the rollout-correction step live. Importing this module registers the
loss under every trajectory-level method's name (`gmc_grpo.integrations.verl.loss_names`: `gmc`,
`tic`, `vcpo`, `is` and a user's registered coefficient rule) and installs the config-driven group step
(`gmc_grpo.integrations.verl.activate`): nothing in verl's data path changes until the config
names a GMC method (`algorithm.rollout_correction.rollout_is=gmc`).

verl catches a plugin's exception and logs it at debug level only, so this module catches its own
(the import of the adapter included): it logs the error at ERROR level (shown by verl's default
logging) and registers, under each of the paper's trajectory-level method names (read from the
specs themselves, `gmc_grpo.methods.PAPER_METHODS`, without loading the user's method modules,
whose import may be what failed), a loss that raises the error when it is first requested. `VERL_USE_EXTERNAL_MODULES=gmc_grpo.integrations.verl_plugin` (verl's older mechanism)
imports the same module.
"""

import logging

LOAD_ERROR: BaseException | None = None


def _register_failure(error: BaseException) -> None:
    """Register a loss under every name that raises `error` when verl first requests it."""
    message = (
        f"gmc-grpo's verl plugin failed to load ({type(error).__name__}: {error}); the policy loss "
        "cannot run. Reinstall with pip install -e '.[verl]' in a gmc-grpo clone (verl 0.9.x)"
    )

    def failed_loss(*_args, **_kwargs):
        raise RuntimeError(message) from error

    try:
        from verl.trainer.ppo import core_algos

        from gmc_grpo.methods import PAPER_METHODS

        for name in (spec.name for spec in PAPER_METHODS if spec.trajectory_level):
            core_algos.register_policy_loss(name)(failed_loss)
    except Exception:  # noqa: BLE001 - the log line below still reports the original error
        pass


try:
    from gmc_grpo.integrations import verl as _adapter

    _adapter.activate()
except Exception as _error:  # noqa: BLE001 - reported here, and again when the loss is requested
    LOAD_ERROR = _error
    logging.getLogger("gmc_grpo.integrations.verl_plugin").error(
        "gmc-grpo's verl plugin failed to load: %s: %s", type(_error).__name__, _error
    )
    _register_failure(_error)
