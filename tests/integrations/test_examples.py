"""The engine examples in `examples/`, run as the docs show them: each documented CPU command is
read from the page or docstring that shows it and run in a subprocess from the repository root,
with no `PYTHONPATH` (the scripts must find `examples.tiny` themselves).

TRL sync and TRL async train a tiny Qwen3 for a few steps (nothing downloaded); the verl example's
overrides are composed with verl's own config by Hydra (in `.venv-verl`, where verl is installed;
verl's training itself needs GPUs).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    p for p in (ROOT / "examples").glob("*.py") if "__main__" in p.read_text(encoding="utf-8")
)


def documented_commands(script: str) -> list[str]:
    """`python examples/<script> ...` lines with a CPU flag (`--tiny`, `--check`, `--print`) as
    written in docs/integrations.md and in the script's own docstring (shell comments dropped)."""
    sources = [ROOT / "docs" / "integrations.md", ROOT / "examples" / script]
    pattern = re.compile(rf"python examples/{re.escape(script)}[^\n#`]*")
    found: list[str] = []
    for source in sources:
        for match in pattern.findall(source.read_text(encoding="utf-8")):
            command = match.strip()
            if re.search(r"--(tiny|check|print)\b", command) and command not in found:
                found.append(command)
    return found


def run_documented(command: str, tmp_path: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run `command` with this interpreter for `python`, an `--output-dir` moved under
    `tmp_path`, no `PYTHONPATH`, offline."""
    words = shlex.split(command)
    assert words[0] == "python"
    words[0] = sys.executable
    if "--output-dir" in words:
        at = words.index("--output-dir") + 1
        words[at] = str(tmp_path / Path(words[at]).name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_docs_show_one_cpu_command_per_trl_example():
    sync = documented_commands("trl_sync_gmc.py")
    async_ = documented_commands("trl_async_gmc.py")
    assert sync and async_
    assert all("--tiny" in c for c in sync + async_)  # one flag name for the CPU mode
    assert not any("--local-tiny" in c for c in sync + async_)


@pytest.mark.parametrize("script", [p.name for p in EXAMPLES])
def test_every_example_script_answers_help_from_another_directory(script, tmp_path):
    done = run_documented(f"python {ROOT / 'examples' / script} --help", tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_a_trl_example_without_a_model_says_what_to_give(tmp_path):
    done = run_documented("python examples/trl_sync_gmc.py", tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("or --tiny (CPU)")


def test_trl_sync_example_runs_as_documented_and_writes_its_output_dir(tmp_path):
    pytest.importorskip("trl")
    (command,) = documented_commands("trl_sync_gmc.py")
    done = run_documented(command, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "trl_gmc"
    assert str(out) in done.stdout  # it says where it wrote
    rows = [json.loads(line) for line in (out / "log_history.jsonl").read_text().splitlines()]
    steps = int(re.search(r"--max-steps (\d+)", command).group(1))
    trained = [r for r in rows if "gmc/ratio/log_max" in r]
    assert [r["step"] for r in trained] == list(range(1, steps + 1))
    assert (out / "model.safetensors").exists() and (out / "config.json").exists()


def test_trl_async_example_runs_as_documented_and_trains_what_trl_would_drop(tmp_path):
    """The documented default trains samples TRL's default `max_staleness` would drop, and each
    logged row's `gmc/lag_max`, `gmc/lag_mean`, `gmc/stale_frac` equal those of the samples the
    sample log records for that step (not of the next, prefetched batch)."""
    pytest.importorskip("trl.experimental.async_grpo")
    from gmc_grpo.integrations.trl_async import (
        SAMPLE_LOG,
        TRL_DEFAULT_MAX_STALENESS,
        read_sample_log,
    )

    (command,) = documented_commands("trl_async_gmc.py")
    done = run_documented(command, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "trl_async_gmc"
    assert str(out) in done.stdout  # it says where it wrote
    lags_by_step: dict[int, list[int]] = {}
    for record in read_sample_log(str(out / SAMPLE_LOG)):
        lags_by_step.setdefault(record["step"], []).append(record["lag"])
    # the lagging groups' lag grows by one a step up to 6: lags 5 and 6 (> 4) at steps 7 and 8
    assert {step: max(v) for step, v in lags_by_step.items()} == {
        1: 0, 2: 0, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5, 8: 6
    }  # fmt: skip
    assert max(max(v) for v in lags_by_step.values()) > TRL_DEFAULT_MAX_STALENESS
    assert "trained 8 of 64 samples with a lag above" in done.stdout
    logged = [json.loads(line) for line in (out / "log_history.jsonl").read_text().splitlines()]
    rows = [r for r in logged if "gmc/lag_max" in r]
    assert [r["step"] for r in rows] == sorted(lags_by_step) == list(range(1, 9))
    for row in rows:
        lags = lags_by_step[row["step"]]
        assert row["gmc/lag_max"] == max(lags)
        assert row["gmc/lag_mean"] == pytest.approx(sum(lags) / len(lags))
        stale = sum(lag > TRL_DEFAULT_MAX_STALENESS for lag in lags) / len(lags)
        assert row["gmc/stale_frac"] == pytest.approx(stale)


def test_verl_example_prints_its_overrides_as_documented(tmp_path):
    commands = [c for c in documented_commands("verl_gmc.py") if "--print" in c]
    assert commands
    for command in commands:
        done = run_documented(command, tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "actor_rollout_ref.actor.policy_loss.loss_mode=gmc" in done.stdout.splitlines()


@pytest.mark.parametrize("method", ["gmc", "vcpo"])
def test_verl_example_overrides_compose_with_verls_config(method):
    pytest.importorskip("verl")
    sys.path.insert(0, str(ROOT))
    from examples import verl_gmc

    result = verl_gmc.main(["--check", "--method", method])
    assert result["loss_mode"] == method and result["rollout_is"] == method
    assert (
        result["adv_estimator"].endswith("rloo")
        and result["loss_agg_mode"] == "seq-mean-token-sum-norm"
    )
    if method == "gmc":
        assert result["eps"] == pytest.approx(0.28)
    else:
        assert result["truncation"] == 8.0
