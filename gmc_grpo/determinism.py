"""The same records on every machine: pin what makes CPU kernels differ, and record it.

A CPU run's numbers depend on more than the seeds. Measured on the project's 2-core AMD EPYC
(AVX-512; torch 2.13.0+cpu, MKL 2024.2, oneDNN 3.12; one 40-update GMC run of the
`tiny_delay_sweep` recipe at D = 32, seed 0, `docs/llm-cpu.md`): ATen's kernel level changes 541
of its 857 record fields (`ATEN_CPU_CAPABILITY=default`, the level a CPU without AVX2 picks), and
AVX2 against AVX-512 changes 227 of 402 fields of a 20-update run; the thread count changes 191 of
857 (one thread against two). What varies, and the pin this module sets:

| source                                  | variable             | pinned to (x86-64 with AVX2) |
|-----------------------------------------|----------------------|------------------------------|
| ATen's vectorised kernels (exp, sums,   | `ATEN_CPU_CAPABILITY`| `avx2`                       |
| softmax, ...): the widest level the CPU |                      |                              |
| has (`DispatchStub`)                    |                      |                              |
| MKL's code branch (GEMM): the CPU's ISA | `MKL_CBWR`           | `COMPATIBLE`                 |
| and vendor                              |                      |                              |
| oneDNN's kernels: the CPU's ISA         | `ONEDNN_MAX_CPU_ISA` | `AVX2`                       |
| how reductions are split: thread counts | `OMP_NUM_THREADS`,   | `GMC_GRPO_CPU_THREADS`       |
|                                         | `MKL_NUM_THREADS`    | (default 1)                  |

Why these values (ours): AVX2 is what every x86-64 CPU of the last decade has (Intel Haswell,
2013; AMD Excavator, 2015), and ATen's AVX2 kernels are the same code on any of them. MKL's
reproducibility branches other than `COMPATIBLE` follow the vendor: on this AMD CPU
`MKL_CBWR=AVX2` runs as `CNR:AUTO` (seen with `MKL_VERBOSE=1`), while Intel's documentation
promises AVX2-branch reproducibility on Intel CPUs only; `COMPATIBLE` (SSE2 without the
approximate `rcpps`/`rsqrtps`) is the one branch MKL runs alike on every x86-64 CPU. It costs
about a fifth more CPU time on the tiny recipe (measured: 14.3 s against 11.8 s user time for the
40-update run above, one sample each on the shared machine).

**Fallback.** A CPU without AVX2 (or FMA) gets ATen's `default` level, `ONEDNN_MAX_CPU_ISA=SSE41`
and MKL `COMPATIBLE`: its records are its own, and `kernel_facts()` says so (`level`
"default"), which the committed record digests (`tests/data/record_digests.json`) name as the
cause when they differ. On other architectures (ARM) only the thread counts are pinned (`level`
"native").

**Escape hatch.** `GMC_GRPO_CPU_KERNELS=native` leaves every variable as the environment has it
(the fastest kernels; records then depend on the machine). Otherwise the pin wins over a value the
outer environment set (`ATEN_CPU_CAPABILITY=default` in the shell changes nothing); the value it
replaced is kept in `kernel_facts()["overridden"]`.

ATen reads `ATEN_CPU_CAPABILITY` at its first kernel dispatch, MKL and oneDNN theirs at their
first call, OpenMP its thread count when torch starts: `pin_cpu_kernels()` must run before `import
torch`, so every entry point that trains calls it first (`pipeline/cli.py`, `llm_runs/cli.py`,
`toy_mdps/cli.py`) and worker processes inherit the variables (they are spawned with the parent's
environment). `kernel_facts()` is what `config.json`'s `environment.cpu` stores: the CPU model, its
SIMD flags, the pin, ATen's kernel choice (`torch.backends.cpu.get_cpu_capability()`) and the
thread counts.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

#: `native` leaves the environment alone; anything else (or unset) pins
KERNELS_VARIABLE = "GMC_GRPO_CPU_KERNELS"
#: the pinned thread count (a whole number >= 1; default `DEFAULT_THREADS`)
THREADS_VARIABLE = "GMC_GRPO_CPU_THREADS"
DEFAULT_THREADS = 1
#: the variables the pin sets, in the order `pinned_variables` lists them
PINNED = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "ONEDNN_MAX_CPU_ISA",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)
#: the instruction-set flags that decide a kernel level (from `/proc/cpuinfo`'s `flags`)
SIMD_FLAG = re.compile(r"^(sse\d?(_\d)?|ssse3|avx.*|fma|f16c|amx.*|sve.*|asimd.*|neon)$")
X86_64 = ("x86_64", "amd64")


def cpuinfo_text() -> str:
    """`/proc/cpuinfo` (Linux); "" where it cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def cpu_model(cpuinfo: str) -> str:
    """The CPU's name from `cpuinfo` text (`model name`), else `platform.processor()`."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or "unknown"


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """Every flag of the first `flags` (x86) or `Features` (ARM) line of `cpuinfo` text."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def pin_level(flags: frozenset[str], machine: str) -> str:
    """The kernel level the pin chooses: "avx2" on x86-64 with AVX2 and FMA, "default" on x86-64
    without, "native" on other architectures (only thread counts pinned)."""
    if machine.lower() not in X86_64:
        return "native"
    return "avx2" if {"avx2", "fma"} <= flags else "default"


def pinned_variables(level: str, threads: int) -> dict[str, str]:
    """The environment variables of a pin `level` (`pin_level`) with `threads` threads.

    Example: `pinned_variables("avx2", 1)` is `{"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR":
    "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}`.
    """
    if level not in ("avx2", "default", "native"):
        raise ValueError(f"level={level!r}: must be 'avx2', 'default' or 'native'")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads={threads!r}: must be a whole number >= 1")
    variables: dict[str, str] = {}
    if level == "avx2":
        variables = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"}
        variables["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    elif level == "default":
        variables = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
        variables["ONEDNN_MAX_CPU_ISA"] = "SSE41"
    variables["OMP_NUM_THREADS"] = str(threads)
    variables["MKL_NUM_THREADS"] = str(threads)
    return variables


def pinned_threads(environ: Mapping[str, str]) -> int:
    """The thread count `GMC_GRPO_CPU_THREADS` asks for (default 1); a bad value raises a
    `ValueError` naming the variable and the fix."""
    text = environ.get(THREADS_VARIABLE, "").strip()
    if not text:
        return DEFAULT_THREADS
    if not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"{THREADS_VARIABLE}={text!r}: must be a whole number >= 1 (the torch threads of "
            "every run; records depend on it), or unset for 1"
        )
    return int(text)


def pin_cpu_kernels(
    environ: MutableMapping[str, str] | None = None,
    *,
    cpuinfo: str | None = None,
    machine: str | None = None,
) -> dict[str, str]:
    """Set the pin's variables in `environ` (default `os.environ`); return what was set.

    Call before `import torch` (module docstring). With `GMC_GRPO_CPU_KERNELS=native` nothing is
    set and {} is returned. A value the environment held before and the pin replaced is kept in
    `GMC_GRPO_CPU_OVERRIDDEN` (`VAR=value` pairs joined by `;`) for `kernel_facts()`.
    """
    env = os.environ if environ is None else environ
    if env.get(KERNELS_VARIABLE, "").strip().lower() == "native":
        return {}
    flags = cpu_flags(cpuinfo_text() if cpuinfo is None else cpuinfo)
    level = pin_level(flags, machine if machine is not None else platform.machine())
    variables = pinned_variables(level, pinned_threads(env))
    overridden = dict(
        item.split("=", 1) for item in env.get(OVERRIDDEN_VARIABLE, "").split(";") if "=" in item
    )
    for name, value in variables.items():
        before = env.get(name)
        if before is not None and before != value and name not in overridden:
            overridden[name] = before
        env[name] = value
    if overridden:
        env[OVERRIDDEN_VARIABLE] = ";".join(f"{k}={v}" for k, v in sorted(overridden.items()))
    env[LEVEL_VARIABLE] = level
    return variables


#: set by `pin_cpu_kernels`: the outer values it replaced, and the level it chose
OVERRIDDEN_VARIABLE = "GMC_GRPO_CPU_OVERRIDDEN"
LEVEL_VARIABLE = "GMC_GRPO_CPU_PIN"


def kernel_facts(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What decides this process's CPU kernels, for `config.json`'s `environment.cpu`.

    Returns `{"model", "machine", "simd_flags" (sorted), "pin" (the level `pin_cpu_kernels`
    chose, or "off"), "variables" (each of `PINNED` as the process sees it, None when unset),
    "overridden" (outer values the pin replaced), "aten_capability" and "torch_threads"}`; the
    last two come from torch when this process has imported it, else None (a process that
    never imports torch runs no kernel).
    """
    env = os.environ if environ is None else environ
    info = cpuinfo_text()
    torch = sys.modules.get("torch")
    capability = threads = None
    if torch is not None and hasattr(torch, "backends"):
        capability = str(torch.backends.cpu.get_cpu_capability())
        threads = int(torch.get_num_threads())
    overridden = dict(
        item.split("=", 1) for item in env.get(OVERRIDDEN_VARIABLE, "").split(";") if "=" in item
    )
    return {
        "model": cpu_model(info),
        "machine": platform.machine(),
        "simd_flags": sorted(f for f in cpu_flags(info) if SIMD_FLAG.match(f)),
        "pin": env.get(LEVEL_VARIABLE, "off"),
        "variables": {name: env.get(name) for name in PINNED},
        "overridden": overridden,
        "aten_capability": capability,
        "torch_threads": threads,
    }


#: the facts that decide the numbers (`kernel_facts` keys); the CPU model and its flags do not,
#: once the pin holds
DECIDING = ("pin", "variables", "aten_capability", "torch_threads")


def kernel_difference(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The deciding facts (`DECIDING`) that differ between two `kernel_facts()`, as
    `"name: recorded -> current"` lines ([] when the kernels are the same)."""
    return [
        f"{name}: {recorded.get(name)!r} -> {current.get(name)!r}"
        for name in DECIDING
        if recorded.get(name) != current.get(name)
    ]


#: record fields that measure the machine, not the run (left out of `records_digest`)
UNDIGESTED = re.compile(r"(seconds|time_s|wall_s|^perf/|tokens_per_s|peak_memory)")


def records_digest(rows: list[Mapping[str, Any]]) -> str:
    """The SHA-256 of `rows` (a run's `metrics.jsonl` then `evals.jsonl` rows) without the
    fields `UNDIGESTED` matches, as canonical JSON (sorted keys; floats written exactly, so one
    differing bit changes the digest)."""
    import hashlib
    import json

    kept = [{k: v for k, v in row.items() if not UNDIGESTED.search(k)} for row in rows]
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pin_at_entry(prog: str) -> int | None:
    """`pin_cpu_kernels()` for a command line's `main`: None when done, or exit status 2 after
    one line on stderr naming the variable (a bad `GMC_GRPO_CPU_THREADS`).

    A `main` may be called in a process that has already loaded torch (a driver script, a
    notebook, the test suite). ATen fixes its kernel level at its first kernel, so: where torch
    reports the pinned level (nothing ran yet, or this CPU's own level is the pin's), the pin
    stands and torch's thread count is set to it; where torch already runs another level, the
    process cannot be pinned, and the variables are restored, so that its child processes (suite
    workers, the engine process, sweep jobs) compute as it does (pinning only the children made a
    parent's and its children's records differ). `kernel_facts()` records what a run used."""
    names = [*PINNED, OVERRIDDEN_VARIABLE, LEVEL_VARIABLE]
    before = {name: os.environ.get(name) for name in names}
    try:
        variables = pin_cpu_kernels()
    except ValueError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    torch = sys.modules.get("torch")
    if torch is None or not variables:
        return None
    level = variables.get("ATEN_CPU_CAPABILITY")
    if level is not None and torch.backends.cpu.get_cpu_capability().lower() != level.lower():
        for name, value in before.items():  # too late for this process: children run as it does
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        return None
    torch.set_num_threads(int(variables["OMP_NUM_THREADS"]))
    return None


__all__ = [
    "DECIDING",
    "DEFAULT_THREADS",
    "KERNELS_VARIABLE",
    "PINNED",
    "THREADS_VARIABLE",
    "cpu_flags",
    "cpu_model",
    "kernel_difference",
    "kernel_facts",
    "pin_at_entry",
    "pin_cpu_kernels",
    "pin_level",
    "pinned_threads",
    "pinned_variables",
    "records_digest",
]
