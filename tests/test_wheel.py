"""The built wheel: `python -m build --wheel` of a copy of the clone installs into a clean virtual
environment and its packages, data files and console script work from there (not from the clone).

The clean environment gets the wheel only (`--no-deps`, no index); its dependencies (torch, numpy,
...) are borrowed from this interpreter's site-packages through `PYTHONPATH`, which does not run
that folder's `.pth` files, so this project's editable install there stays inactive and every
project module must come from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gmc_grpo", "theory", "toy_mdps", "llm_runs", "figures", "pipeline")
IGNORED = shutil.ignore_patterns(
    ".git", ".venv*", "runs", "results", "build", "dist", "site", "*.egg-info", "__pycache__"
)

CHECK = """
import importlib, json, sys
from pathlib import Path
site = Path(sys.argv[1]).resolve()
for name in {packages}:
    module = importlib.import_module(name)
    assert site in Path(module.__file__).resolve().parents, (name, module.__file__)
from figures.paper_reference import DATA_DIR
assert (DATA_DIR / "table3.json").is_file()
import torch
from gmc_grpo import estimators
# GMC (eq. 9): rho = (0.5, 2, 3, 0.5), rho_bar = 1.5, alpha = 1.28 / 1.5; c = alpha * rho
s = torch.log(torch.tensor([[0.5, 2.0, 3.0, 0.5]], dtype=torch.float64))
c = estimators.coefficients("gmc", s, eps=0.28)
print(json.dumps({{"coefficients": [round(float(x), 6) for x in c[0]]}}))
"""


def test_the_built_wheel_installs_and_imports_in_a_clean_venv(tmp_path: Path) -> None:
    pytest.importorskip("build")
    source = tmp_path / "clone"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = dist.glob("gmc_grpo-*.whl")

    env_dir = tmp_path / "clean"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    installed = subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]  # the dependencies, not their .pth
    code = CHECK.format(packages=PACKAGES)
    done = subprocess.run(
        [str(python), "-c", code, site], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    alpha = 1.28 / 1.5
    assert json.loads(done.stdout.strip().splitlines()[-1])["coefficients"] == [
        round(alpha * r, 6) for r in (0.5, 2.0, 3.0, 0.5)
    ]
    helped = subprocess.run(
        [str(env_dir / "bin" / "gmc-grpo"), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert "reproduce" in helped.stdout
