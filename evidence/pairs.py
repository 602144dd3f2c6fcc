"""GMC against TIC like with like: every pair of tracked runs, measurement beside measurement and
bound beside bound, at the same step size and with each method tuned on the same grid.

A **pair** is a GMC run and a TIC run of one experiment folder with the same delay, schedule,
`G`, `B`, `eps`, `N`, step size `eta` and seeds (the learners of one seed share `theta_0` and
their generator seed, so differences are paired over seeds). Per pair (`gmc_tic_pairs`):

* the measured ratio of the convergence metric `(1/N) sum_n ||grad J(theta_n)||^2`, GMC over
  TIC: per-seed log-ratio, Student-t 95% interval, exponentiated; "GMC below TIC" holds when the
  interval lies below 1, does not hold when above;
* final `J` of both (mean [interval]) and the paired difference GMC - TIC, with the verdict of
  "GMC's final J above TIC's": a smaller gradient metric can also mean a learner that stalls;
* the bounds' ratio at the same `eta`: Theorem 1 over Theorem 2 with explicit constants, each
  with its own run's constants (`log C`, `tau4` and `J(theta_0)` differ between the runs), whole
  bound and delay term alone (both with Proposition 1's constant 8).

**Tuned over eta** (`tuned_pairs`): within one folder, for each `(delay, schedule, G, B, eps, N)`
with two step sizes or more for both methods, each method's best grid `eta` by the measured mean
metric and, separately, by the bound; the ratios GMC/TIC of the tuned measurements and of the
tuned bounds on that same grid. A best `eta` at the smallest or largest grid value is
**censored** (the optimum may lie outside the grid) and said so. The measured tuned ratio picks
each method's `eta` on the seeds it is then evaluated on, so it is optimistic for both methods.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evidence.measured import RunBounds
from gmc_grpo.json_files import read_json
from gmc_grpo.stats import holm_adjust, paired_t_test, t_interval

# the declared primary comparison of the bounds stage's pairs (issue 31): GMC's gradient metric
# below TIC's in `bounds_quick` at the larger delay and the middle step size of its grid (the
# theorems' setting; fixed before the runs). Every other non-identical pair in the setting is
# one Holm family per claim (gradient metric, final J).
PRIMARY_PAIR = {"folder": "bounds_quick", "delay": 64, "eta": 20.0}
PAIR_FIELDS = ("delay", "schedule", "num_workers", "group_size", "num_groups", "eps", "total_steps")


def _config(result: RunBounds) -> dict[str, Any]:
    return read_json(Path(result.run_dir) / "config.json")["config"]


def _per_seed(result: RunBounds) -> dict[str, dict[str, float]]:
    return read_json(Path(result.run_dir) / "summary.json")["per_seed"]


def _key(result: RunBounds, cfg: dict[str, Any]) -> tuple[Any, ...]:
    return (str(Path(result.run_dir).parent), *(cfg.get(k) for k in PAIR_FIELDS))


def _verdict(interval: dict[str, float], below: float, sign: float) -> str:
    """`holds` when the interval lies on the claimed side of `below`, `does not hold` on the
    other, else `not significant` (one seed: not significant)."""
    lo, hi = sorted((sign * (interval["lo"] - below), sign * (interval["hi"] - below)))
    if interval.get("n", 2) < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
        return "not significant"
    if lo > 0:
        return "holds"
    if hi < 0:
        return "does not hold"
    return "not significant"


def _bound(result: RunBounds, term: str = "total") -> float | None:
    entry = result.terms.get(term, {}).get("paper")
    return None if entry is None else float(entry["bound"])


def gmc_tic_pairs(results: Sequence[RunBounds], level: float = 0.95) -> list[dict[str, Any]]:
    """Every GMC/TIC pair among `results` (module docstring), sorted by folder, delay, eta."""
    by_key: dict[tuple[Any, ...], dict[str, RunBounds]] = {}
    for r in results:
        if r.method not in ("gmc", "tic"):
            continue
        cfg = _config(r)
        key = (*_key(r, cfg), float(cfg["lr"]), tuple(cfg["seeds"]))
        by_key.setdefault(key, {})[r.method] = r
    out = []
    for key, pair in sorted(by_key.items(), key=lambda kv: str(kv[0])):
        if set(pair) != {"gmc", "tic"}:
            continue
        gmc, tic = pair["gmc"], pair["tic"]
        a, b = _per_seed(gmc), _per_seed(tic)
        seeds = [s for s in a if s in b]
        log_ratio = paired_t_test(
            [
                math.log(a[s]["convergence_metric"] / b[s]["convergence_metric"])
                for s in seeds
                if a[s]["convergence_metric"] > 0 and b[s]["convergence_metric"] > 0
            ],
            level,
        )
        ratio = {k: math.exp(log_ratio[k]) for k in ("mean", "lo", "hi")} | {"n": log_ratio["n"]}
        final = {
            m: t_interval([p[s]["final_objective"] for s in seeds], level)
            for m, p in (("gmc", a), ("tic", b))
        }
        final_diff = paired_t_test(
            [a[s]["final_objective"] - b[s]["final_objective"] for s in seeds], level
        )
        bounds = {term: (_bound(gmc, term), _bound(tic, term)) for term in ("total", "delay")}
        identical = all(
            a[s]["convergence_metric"] == b[s]["convergence_metric"]
            and a[s]["final_objective"] == b[s]["final_objective"]
            for s in seeds
        )
        out.append(
            {
                "folder": Path(key[0]).name,
                **dict(zip(PAIR_FIELDS, key[1:-2], strict=True)),
                "eta": key[-2],
                "seeds": len(seeds),
                "gmc_run": gmc.name,
                "tic_run": tic.name,
                "gmc_dir": gmc.run_dir,
                "tic_dir": tic.run_dir,
                "metric": {
                    m: t_interval([p[s]["convergence_metric"] for s in seeds], level)
                    for m, p in (("gmc", a), ("tic", b))
                },
                "ratio": ratio,
                "ratio_p": log_ratio["p"],
                "final_p": final_diff["p"],
                "identical": identical,
                "in_setting": gmc.in_setting and tic.in_setting,
                "ratio_verdict": _verdict(log_ratio, 0.0, -1.0),
                "final_objective": final,
                "final_difference": final_diff,
                "final_verdict": _verdict(final_diff, 0.0, 1.0),
                "bound_ratio": _safe_ratio(*bounds["total"]),
                "bound_delay_ratio": _safe_ratio(*bounds["delay"]),
                "log_C": {"gmc": gmc.constants["log_C"], "tic": tic.constants["log_C"]},
            }
        )
    return multiplicity(out, 1.0 - level)


def is_primary(pair: dict[str, Any]) -> bool:
    """The declared primary pair (`PRIMARY_PAIR`)."""
    return all(pair.get(k) == v for k, v in PRIMARY_PAIR.items())


def multiplicity(pairs: list[dict[str, Any]], alpha: float = 0.05) -> list[dict[str, Any]]:
    """Mark each pair's `role`: `primary` (`PRIMARY_PAIR`, non-identical, in the setting),
    `identical` (no group capped: GMC and TIC the same learner, excluded from every count),
    `outside` (a run outside the theorems' setting) or `secondary`; the secondary pairs' p-values
    Holm-adjusted per claim (`ratio_p_holm`, `ratio_verdict_holm`; `final_p_holm`,
    `final_verdict_holm`)."""
    for p in pairs:
        p["role"] = (
            "identical"
            if p["identical"]
            else "outside"
            if not p["in_setting"]
            else "primary"
            if is_primary(p)
            else "secondary"
        )
    family = [p for p in pairs if p["role"] == "secondary"]
    for claim, sign in (("ratio", -1.0), ("final", 1.0)):
        adjusted = holm_adjust([p[f"{claim}_p"] for p in family])
        for p, adj in zip(family, adjusted, strict=True):
            mean = (
                math.log(p["ratio"]["mean"]) if claim == "ratio" else p["final_difference"]["mean"]
            )
            p[f"{claim}_p_holm"] = adj
            p[f"{claim}_verdict_holm"] = (
                "holds"
                if adj < alpha and sign * mean > 0
                else "does not hold"
                if adj < alpha
                else "not significant"
            )
    return pairs


def _safe_ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def tuned_pairs(
    results: Sequence[RunBounds], pairs: Sequence[dict[str, Any]], level: float = 0.95
) -> list[dict[str, Any]]:
    """Each method tuned over the grid of `eta` (module docstring), measured and bound apart."""
    runs = {r.run_dir: r for r in results}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for p in pairs:
        groups.setdefault((p["folder"], *(p[k] for k in PAIR_FIELDS)), []).append(p)
    out = []
    for key, members in sorted(groups.items(), key=lambda kv: str(kv[0])):
        etas = sorted({p["eta"] for p in members})
        if len(etas) < 2:
            continue
        entry: dict[str, Any] = {
            "folder": key[0],
            **dict(zip(PAIR_FIELDS, key[1:], strict=True)),
            "grid": etas,
        }
        chosen = {}
        for method in ("gmc", "tic"):
            by_eta = {p["eta"]: runs[p[f"{method}_dir"]] for p in members}
            measured = {
                e: t_interval([v["convergence_metric"] for v in _per_seed(r).values()])["mean"]
                for e, r in by_eta.items()
            }
            bounds = {e: _bound(r) for e, r in by_eta.items()}
            best_m = min(measured, key=measured.__getitem__)
            best_b = min((e for e in bounds if bounds[e] is not None), key=bounds.__getitem__)
            chosen[method] = by_eta[best_m]
            entry[method] = {
                "measured_eta": best_m,
                "measured": measured[best_m],
                "measured_censored": best_m in (etas[0], etas[-1]),
                "bound_eta": best_b,
                "bound": bounds[best_b],
                "bound_censored": best_b in (etas[0], etas[-1]),
            }
        a, b = _per_seed(chosen["gmc"]), _per_seed(chosen["tic"])
        log_ratio = t_interval(
            [
                math.log(a[s]["convergence_metric"] / b[s]["convergence_metric"])
                for s in a
                if s in b
            ],
            level,
        )
        entry["measured_ratio"] = {k: math.exp(log_ratio[k]) for k in ("mean", "lo", "hi")} | {
            "n": log_ratio["n"]
        }
        entry["bound_ratio"] = entry["gmc"]["bound"] / entry["tic"]["bound"]
        entry["censored"] = any(
            entry[m][f"{kind}_censored"] for m in ("gmc", "tic") for kind in ("measured", "bound")
        )
        out.append(entry)
    return out
