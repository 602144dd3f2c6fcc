"""How far the trainers' config objects travel (issue 33, `bench/config_reach.py`): the LLM
trainer hands its parts slices, so the config itself stays within a stated bound of modules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the LLM config reaches `llm_runs/train.py` and `llm_runs/preflight.py` (whose memory plan
# reads most of the config); before the slices it reached 9 modules with 20 returns
LLM_MAX_MODULES = 3
LLM_MAX_RETURNS = 2


def config_reach():
    spec = importlib.util.spec_from_file_location("config_reach", ROOT / "bench/config_reach.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.config_reach


def test_the_llm_config_reaches_few_modules():
    reach = config_reach()(ROOT, "llm_runs/train.py", "train", "config")
    assert reach["modules"] <= LLM_MAX_MODULES, reach["module_list"]
    assert reach["returns"] <= LLM_MAX_RETURNS, reach["trace"]
    assert "llm_runs/rollouts.py" not in reach["module_list"]  # it takes RolloutSettings


def test_the_walk_follows_self_attributes_and_counts_returns(tmp_path):
    """A config stored on `self` and handed on from a method, to a module entered twice."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/a.py").write_text(
        "from pkg.b import use, Holder\n"
        "def start(config):\n"
        "    use(config)\n"
        "    Holder(config).go()\n"
    )
    (tmp_path / "pkg/b.py").write_text(
        "from pkg import c\n"
        "def use(config):\n"
        "    return config.x\n"
        "class Holder:\n"
        "    def __init__(self, config):\n"
        "        self.config = config\n"
        "    def go(self):\n"
        "        c.read(self.config.x)\n"  # a value read from it: not the config
        "        c.keep(self.config)\n"
    )
    (tmp_path / "pkg/c.py").write_text("def read(x):\n    pass\ndef keep(config):\n    pass\n")
    reach = config_reach()(tmp_path, "pkg/a.py", "start", "config")
    assert reach["module_list"] == ["pkg/a.py", "pkg/b.py", "pkg/c.py"]
    # a -> b, back to a, a -> b again (Holder), b -> c, back to b, back to a
    assert reach["entries"] == 3
    assert reach["returns"] == 4
