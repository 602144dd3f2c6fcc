"""The module verl loads to enable GMC: the `verl.plugins` entry point of gmc-grpo.

`pip install -e ".[verl]"` (in a clone) declares the entry point `gmc = gmc_grpo.integrations.verl_plugin`
(group `verl.plugins`). verl 0.9 loads that group at `import verl` in every process (driver,
trainer, actor workers; `VERL_USE_EXTERNAL_PLUGINS`, default `auto`), which is where the
policy-loss registry and the rollout-correction step live. Importing this module registers the
losses `gmc`, `tic`, `vcpo`, `is` and installs the config-driven group step
(`gmc_grpo.integrations.verl.activate`): nothing in verl's data path changes until the config
names a GMC method (`algorithm.rollout_correction.rollout_is=gmc`).

verl catches a plugin's exception and logs it at debug level only, so this module catches its own
(the import of the adapter included): it logs the error at ERROR level (shown by verl's default
logging) and registers, under each loss name, a loss that raises the error when it is first
requested. `VERL_USE_EXTERNAL_MODULES=gmc_grpo.integrations.verl_plugin` (verl's older mechanism)
imports the same module.
"""

import logging

LOSS_NAMES = ("gmc", "tic", "vcpo", "is")  # as gmc_grpo.integrations.verl.LOSS_NAMES
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

        for name in LOSS_NAMES:
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
