"""The CPU kernel pin (`gmc_grpo.determinism`) and the committed digests of two short runs.

The digests in `tests/core/data/record_digests.json` were written by one pinned toy run and one
pinned tiny LLM run (the commands of `JOBS`) on the project's 2-core AMD EPYC. The digest test
reruns both through the `gmc-grpo` router in a fresh process whose outer environment asks for
other kernels (`ATEN_CPU_CAPABILITY=default`, two threads): the pin must win, and the records must
hash to the committed digests. When they do not, the message says why: the kernel facts differ
from the committed ones (another kernel level or thread count: records made there are their own),
or they are the same and a code change moved the numbers (rewrite the digests with
`PYTHONPATH=. python tests/core/test_core_determinism.py --write` and say so in the commit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gmc_grpo.determinism import (
    kernel_difference,
    kernel_facts,
    pin_cpu_kernels,
    pin_level,
    pinned_threads,
    pinned_variables,
    records_digest,
)

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = Path(__file__).resolve().parent / "data" / "record_digests.json"
#: job name -> `gmc-grpo` arguments (`{out}` is the run folder)
JOBS: dict[str, list[str]] = {
    "toy_gmc_d4": [
        *("toy", "train", "--method", "gmc", "--delay", "4", "--steps", "30"),
        *("--seeds", "0,1", "--no-figures", "--no-progress", "--out", "{out}"),
    ],
    "llm_tiny_gmc_d2": [
        *("llm", "train", "--recipe", "tiny_delay", "--run", "gmc", "--steps", "6"),
        *("--set", "delay=2", "--set", "sft_steps=20", "--set", "eval_every=3"),
        *("--set", "eval_samples=2", "--no-progress", "--out", "{out}"),
    ],
}
#: the outer environment of the rerun: other kernels and threads than the pin's
OUTER = {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "2", "MKL_CBWR": "AUTO"}
AVX2_CPU = "flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c avx512f\n"
OLD_CPU = "model name\t: Old Core\nflags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx\n"


# -- the pin, on planted CPUs -------------------------------------------------------------------


def test_pinned_variables_are_the_documented_values():
    assert pinned_variables("avx2", 1) == {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_CBWR": "COMPATIBLE",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    fallback = pinned_variables("default", 3)
    assert fallback["ATEN_CPU_CAPABILITY"] == "default"
    assert fallback["ONEDNN_MAX_CPU_ISA"] == "SSE41"
    assert fallback["OMP_NUM_THREADS"] == fallback["MKL_NUM_THREADS"] == "3"
    assert pinned_variables("native", 2) == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    with pytest.raises(ValueError, match="threads=0"):
        pinned_variables("avx2", 0)


def test_pin_level_needs_avx2_and_fma_on_x86_64():
    assert pin_level(frozenset({"avx2", "fma", "avx512f"}), "x86_64") == "avx2"
    assert pin_level(frozenset({"avx2"}), "x86_64") == "default"  # AVX2 without FMA
    assert pin_level(frozenset({"avx"}), "AMD64") == "default"
    assert pin_level(frozenset({"asimd"}), "aarch64") == "native"


def test_the_pin_replaces_outer_values_and_keeps_them():
    env = {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "8"}
    set_ = pin_cpu_kernels(env, cpuinfo=AVX2_CPU, machine="x86_64")
    assert set_ == pinned_variables("avx2", 1)
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["OMP_NUM_THREADS"] == "1"
    facts = kernel_facts(env)
    assert facts["pin"] == "avx2"
    assert facts["overridden"] == {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "8"}
    # a second call (the toy router after `gmc-grpo`'s) keeps the first outer values
    pin_cpu_kernels(env, cpuinfo=AVX2_CPU, machine="x86_64")
    assert kernel_facts(env)["overridden"]["ATEN_CPU_CAPABILITY"] == "default"


def test_the_fallback_and_the_escape_hatch():
    env: dict[str, str] = {"GMC_GRPO_CPU_THREADS": "2"}
    pin_cpu_kernels(env, cpuinfo=OLD_CPU, machine="x86_64")
    assert env["ATEN_CPU_CAPABILITY"] == "default" and env["OMP_NUM_THREADS"] == "2"
    assert env["GMC_GRPO_CPU_PIN"] == "default"
    native = {"GMC_GRPO_CPU_KERNELS": "native", "ATEN_CPU_CAPABILITY": "avx512"}
    assert pin_cpu_kernels(native, cpuinfo=AVX2_CPU, machine="x86_64") == {}
    assert native == {"GMC_GRPO_CPU_KERNELS": "native", "ATEN_CPU_CAPABILITY": "avx512"}


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_thread_count_names_the_variable(value):
    with pytest.raises(ValueError, match="GMC_GRPO_CPU_THREADS=.*whole number >= 1"):
        pinned_threads({"GMC_GRPO_CPU_THREADS": value})
    assert pinned_threads({}) == 1


def test_a_bad_thread_count_exits_2_with_one_line():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GMC_GRPO_CPU_THREADS": "zero"}
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "toy", "train", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "GMC_GRPO_CPU_THREADS='zero'" in out.stderr


@pytest.mark.parametrize("running", ["AVX512", "AVX2"])
def test_a_main_called_after_torch_loaded_pins_children_only_as_the_parent_runs(
    monkeypatch, running
):
    """Found at merge: a command's `main` called in a process whose torch already ran kernels at
    another level (the test suite) pinned only `os.environ`, so its child processes (engine
    process, sweep jobs) computed with other kernels and threads than the parent and their records
    differed. Now the variables are restored there; where torch runs the pinned level, the pin
    stands and torch's threads follow it."""
    import torch

    from gmc_grpo import determinism

    monkeypatch.setattr(determinism, "cpuinfo_text", lambda: "flags : sse4_2 avx avx2 fma\n")
    monkeypatch.setattr(determinism.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: running)
    threads = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    names = [*determinism.PINNED, determinism.LEVEL_VARIABLE, determinism.OVERRIDDEN_VARIABLE]
    for name in names:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(determinism.KERNELS_VARIABLE, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the outer value, kept where the pin is too late
    assert determinism.pin_at_entry("gmc-grpo toy train") is None
    if running == "AVX512":
        assert os.environ.get("ATEN_CPU_CAPABILITY") is None
        assert os.environ["OMP_NUM_THREADS"] == "2" and threads == []
        assert determinism.LEVEL_VARIABLE not in os.environ
    else:
        assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"
        assert os.environ["OMP_NUM_THREADS"] == "1" and threads == [1]


def test_the_digest_sees_one_bit_and_ignores_timings():
    rows = [{"step": 0, "reward/mean": 0.25, "perf/learner_seconds": 1.0}]
    same = [{"step": 0, "reward/mean": 0.25, "perf/learner_seconds": 9.0}]
    assert records_digest(rows) == records_digest(same)
    nudged = [{"step": 0, "reward/mean": 0.25000000000000006}]  # the next float up
    assert records_digest(rows) != records_digest(nudged)


def test_kernel_difference_names_the_deciding_facts():
    a = {"pin": "avx2", "aten_capability": "AVX2", "torch_threads": 1, "model": "X"}
    b = {**a, "aten_capability": "DEFAULT", "model": "Y"}
    assert kernel_difference(a, b) == ["aten_capability: 'AVX2' -> 'DEFAULT'"]
    assert kernel_difference(a, {**a, "model": "Y"}) == []  # the CPU's name decides nothing


# -- the committed digests ----------------------------------------------------------------------


def run_job(name: str, out: Path, outer: dict[str, str]) -> tuple[str, dict]:
    """Run job `name` through the router in a fresh process; its digest and kernel facts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMC_GRPO_CPU")}
    env.update(outer, PYTHONPATH=str(ROOT))
    argv = [part.replace("{out}", str(out)) for part in JOBS[name]]
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = []
    for file in ("metrics.jsonl", "evals.jsonl"):
        path = out / file
        if path.is_file():
            rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    facts = json.loads((out / "config.json").read_text())["environment"]["cpu"]
    return records_digest(rows), facts


def digest_problem(name: str, digest: str, facts: dict, stored: dict) -> str | None:
    """Why job `name`'s digest differs from the stored one (None when it does not)."""
    entry = stored["jobs"][name]
    if digest == entry["digest"]:
        return None
    kernels = kernel_difference(stored["kernel_facts"], facts)
    if kernels:
        return (
            f"{name}: records differ from the committed digest because the kernel facts differ "
            f"({'; '.join(kernels)}): this machine runs other CPU kernels than the pinned "
            "ones the digests were made with (gmc_grpo.determinism), so its records are its own"
        )
    return (
        f"{name}: records differ from the committed digest on the same kernel facts: a code "
        "change moved the numbers of this run; if intended, rewrite the digests with `PYTHONPATH=."
        " python tests/core/test_core_determinism.py --write` and say so in the commit"
    )


def test_digest_problem_names_the_cause():
    facts = {"pin": "avx2", "variables": {}, "aten_capability": "AVX2", "torch_threads": 1}
    stored = {"kernel_facts": facts, "jobs": {"j": {"digest": "a"}}}
    assert digest_problem("j", "a", facts, stored) is None
    other = {**facts, "pin": "default", "aten_capability": "DEFAULT"}
    message = digest_problem("j", "b", other, stored)
    assert "kernel facts differ" in message and "aten_capability: 'AVX2' -> 'DEFAULT'" in message
    assert "code change" in digest_problem("j", "b", facts, stored)


def test_short_runs_match_the_committed_digests(tmp_path):
    stored = json.loads(DIGESTS.read_text())
    problems = []
    for name in JOBS:
        digest, facts = run_job(name, tmp_path / name, OUTER)
        assert facts["overridden"]["ATEN_CPU_CAPABILITY"] == "default"  # the pin won
        problem = digest_problem(name, digest, facts, stored)
        if problem:
            problems.append(problem)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_the_digests_fail_naming_the_kernels_on_other_kernels(tmp_path):
    """The check can fail: unpinned, with ATen's `default` level (a CPU without AVX2), both
    runs' records differ from the digests and the message names the kernel facts."""
    stored = json.loads(DIGESTS.read_text())
    outer = {"GMC_GRPO_CPU_KERNELS": "native", "ATEN_CPU_CAPABILITY": "default"}
    for name in JOBS:
        digest, facts = run_job(name, tmp_path / name, {**outer, "OMP_NUM_THREADS": "1"})
        assert facts["aten_capability"] == "DEFAULT"
        assert "kernel facts differ" in digest_problem(name, digest, facts, stored)


def write_digests(folder: Path) -> dict:
    """Run every job (pinned, no outer settings) and write `DIGESTS`."""
    jobs, facts = {}, {}
    for name in JOBS:
        digest, facts = run_job(name, folder / name, {})
        jobs[name] = {"digest": digest, "command": "gmc-grpo " + " ".join(JOBS[name])}
    from gmc_grpo.run_writer import git_commit

    payload = {
        "kernel_facts": facts,
        "jobs": jobs,
        "written_at_commit": git_commit(ROOT),
        "how": "PYTHONPATH=. python tests/core/test_core_determinism.py --write",
    }
    DIGESTS.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    return payload


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=. python tests/core/test_core_determinism.py --write")
    with tempfile.TemporaryDirectory() as scratch:
        print(json.dumps(write_digests(Path(scratch)), indent=1))
