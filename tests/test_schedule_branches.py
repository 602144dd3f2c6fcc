"""No code outside the staleness module decides behaviour by a schedule's name or class.

A schedule answers its own questions (`gmc_grpo.staleness.Schedule`: its item kind, the items
pending, the launches ahead, each item's lag, its length unit; `ScheduleSpec`: the fields it
reads, its checks, its run label), so adding one is a change in one place. Every module of
`gmc_grpo/` (outside `gmc_grpo/staleness/`), `toy_mdps/` and `llm_runs/` is read with `ast` and
these are reported:

- a comparison (`==`, `!=`, `in`, `not in`, `is`) between an expression that mentions a schedule
  (`config.schedule`, `cfg["schedule"]`, `get_schedule(...).name`, a name containing
  "schedule") and a schedule's name (or a tuple, list or set holding one);
- a `match` on such an expression with a case that names a schedule;
- a dict literal keyed by schedule names, indexed or `.get` by such an expression;
- `isinstance(x, <a schedule class>)`.

Reading a schedule's name to label or select records (`figures/`, `pipeline/`) is fine and not
checked. The last tests plant each kind of branch in a synthetic tree and check that the
checker reports it, and that labelling code is not reported.
"""

from __future__ import annotations

import ast
from pathlib import Path

from gmc_grpo import staleness

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gmc_grpo", "toy_mdps", "llm_runs")
EXEMPT = ROOT / "gmc_grpo" / "staleness"
NAMES = frozenset((*staleness.schedule_names(), "periodic_sync"))
CLASSES = frozenset(
    name
    for name in dir(staleness)
    if isinstance(getattr(staleness, name), type)
    and issubclass(getattr(staleness, name), staleness.Schedule)
)


def _names_a_schedule(node: ast.AST) -> bool:
    """A string constant that is a schedule's name, or a tuple / list / set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_schedule(element) for element in node.elts)
    return False


def _mentions_schedule(node: ast.AST) -> bool:
    """The expression reads a schedule: `x.schedule`, `x["schedule"]`, `get_schedule(...)`,
    `getattr(x, "schedule")` or a name containing "schedule"."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and "schedule" in sub.attr:
            return True
        if isinstance(sub, ast.Name) and "schedule" in sub.id:
            return True
        if isinstance(sub, ast.Constant) and sub.value == "schedule":
            return True
    return False


def _dict_of_names(node: ast.AST) -> bool:
    return isinstance(node, ast.Dict) and any(
        key is not None and _names_a_schedule(key) for key in node.keys
    )


def branches_in(source: str, where: str) -> list[str]:
    """Every branch on a schedule's name or class in `source` (module docstring)."""
    found = []
    for node in ast.walk(ast.parse(source, filename=where)):
        line = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(_names_a_schedule, operands)) and any(map(_mentions_schedule, operands)):
                found.append(f"{line}: compares a schedule with its name")
        elif isinstance(node, ast.Match) and _mentions_schedule(node.subject):
            for case in node.cases:
                if any(_names_a_schedule(sub) for sub in ast.walk(case.pattern)):
                    found.append(f"{line}: matches a schedule by its name")
        elif isinstance(node, ast.Subscript) and _dict_of_names(node.value):
            if _mentions_schedule(node.slice):
                found.append(f"{line}: a dict keyed by schedule names, indexed by a schedule")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and _dict_of_names(node.func.value):
                if any(map(_mentions_schedule, node.args)):
                    found.append(f"{line}: a dict keyed by schedule names, read by a schedule")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and any(
                isinstance(sub, ast.Name) and sub.id in CLASSES for sub in ast.walk(node.args[1])
            )
        ):
            found.append(f"{line}: tests a schedule's class")
    return found


def scan(root: Path, packages: tuple[str, ...] = PACKAGES, exempt: Path | None = None) -> list[str]:
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if exempt is not None and exempt in path.parents:
                continue
            where = str(path.relative_to(root))
            found += branches_in(path.read_text(encoding="utf-8"), where)
    return found


def test_no_branch_on_a_schedule_name_outside_the_staleness_module():
    assert scan(ROOT, exempt=EXEMPT) == []


def test_the_checker_sees_the_tracks_and_knows_the_schedules():
    files = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    assert len(files) > 50  # the scan really reads the tracks
    assert {"fixed_delay", "length_coupled", "workers"} <= NAMES
    assert {"FixedDelaySchedule", "LengthCoupledSchedule", "WorkerSchedule"} <= CLASSES


PLANTED = {
    "compare": 'if config.schedule == "workers":\n    pass\n',
    "compare_reversed": 'x = "fixed_delay" != self.config.schedule\n',
    "membership": 'if cfg.schedule in ("fixed_delay", "length_coupled"):\n    pass\n',
    "subscript": 'if entry["schedule"] == "length_coupled":\n    pass\n',
    "spec_name": 'if get_schedule(name).name == "workers":\n    pass\n',
    "match": 'match config.schedule:\n    case "workers":\n        pass\n',
    "dispatch": 'make = {"workers": a, "fixed_delay": b}[config.schedule]\n',
    "dispatch_get": 'make = {"workers": a}.get(config.schedule)\n',
    "isinstance": "if isinstance(self.schedule, WorkerSchedule):\n    pass\n",
}


def test_every_planted_branch_is_reported(tmp_path):
    for kind, code in PLANTED.items():
        (tmp_path / "llm_runs").mkdir(exist_ok=True)
        (tmp_path / "llm_runs" / f"planted_{kind}.py").write_text(code)
    found = scan(tmp_path)
    for kind in PLANTED:
        assert any(f"planted_{kind}.py" in line for line in found), kind
    assert len(found) == len(PLANTED)


def test_labels_and_unrelated_names_are_not_reported(tmp_path):
    clean = (
        'row = {"schedule": config.schedule, "delay": spec.setting(config, "delay")}\n'
        'if config.kind == "length_coupled":  # an experiment kind, not a schedule\n'
        "    pass\n"
        'if schedule.item == "group":\n'
        "    pass\n"
        'names = ("fixed_delay", "workers")\n'
    )
    (tmp_path / "toy_mdps").mkdir()
    (tmp_path / "toy_mdps" / "clean.py").write_text(clean)
    assert scan(tmp_path) == []
