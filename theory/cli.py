"""`gmc-grpo theory`: the claims table of the paper's constants and rates (never imports torch)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

EPILOG = """examples:
  gmc-grpo theory                      # claims table and the constants at a few eps
  gmc-grpo theory --json               # the same as JSON (keys: claims, constants, summary)
  gmc-grpo theory --out results/theory # also write the plots (PNG and PDF) and claims.json
  gmc-grpo theory --eps 0.05 0.28 1    # constants table at these eps

verdicts: verified | refuted | not checkable here (the paper's appendix with the proofs is absent)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo theory",
        description=(
            "Derive (sympy) and check (scipy, mpmath) every constant and rate of the GMC-GRPO "
            "paper: the KL denominators c_eps and log(1+2eps) and their tight versions, the delay "
            "penalties, Corollary 1's eps*, the delay tolerance and Corollary 2's G^(-2/5)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the bound plots (PNG and PDF) and claims.json to DIR",
    )
    parser.add_argument(
        "--eps",
        type=float,
        nargs="+",
        default=[0.01, 0.1, 0.2, 0.28, 0.5, 1.0, 10.0],
        metavar="EPS",
        help="thresholds for the constants table (default: %(default)s)",
    )
    return parser


def constants_table(eps_values: list[float]) -> list[dict[str, float]]:
    """One row per `eps`: both denominators, the tight GMC constant and the improvement factors."""
    from theory.constants import (
        c_eps,
        gmc_denominator,
        improvement_factor,
        tight_gmc_denominator,
    )

    return [
        {
            "eps": e,
            "c_eps": float(c_eps(e)),
            "log(1+2eps)": float(gmc_denominator(e)),
            "tight_gmc": float(tight_gmc_denominator(e)),
            "improvement_factor": float(improvement_factor(e)),
            "improvement_factor_tight": float(improvement_factor(e, tight=True)),
        }
        for e in eps_values
    ]


def format_table(
    rows: list[dict[str, str]], consts: list[dict[str, float]], counts: dict[str, int]
) -> str:
    """Human-readable claims table followed by the constants table."""
    width = 100
    lines = ["GMC-GRPO theory: claims of the paper, what we derived, verdict", "=" * width]
    for i, row in enumerate(rows, 1):
        lines.append(f"{i:2d}. [{row['verdict']}] {row['claim']}")
        lines.append(f"    where:   {row['where']}")
        for key in ("derived", "how"):
            wrapped = textwrap.wrap(row[key], width=width - 13)
            lines.append(f"    {key + ':':8s} {wrapped[0] if wrapped else ''}")
            lines.extend(f"             {w}" for w in wrapped[1:])
        lines.append("")
    lines.append("summary: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    lines.append("")
    header = [
        "eps",
        "c_eps",
        "log(1+2eps)",
        "tight_gmc",
        "improvement_factor",
        "improvement_factor_tight",
    ]
    lines.append("constants (tight TIC = c_eps; improvement factor = (TIC den / GMC den)^(2/5))")
    lines.append("  ".join(f"{h:>12s}" if i else f"{h:>8s}" for i, h in enumerate(header)))
    for c in consts:
        lines.append(
            "  ".join(f"{c[h]:>12.6g}" if i else f"{c[h]:>8g}" for i, h in enumerate(header))
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point routed from `gmc-grpo theory`."""
    args = build_parser().parse_args(argv)
    if any(e <= 0 for e in args.eps):
        print(f"error: --eps values must be > 0, got {args.eps}", file=sys.stderr)
        return 2
    from theory.claims import evaluate_claims, summary

    rows = evaluate_claims()
    consts = constants_table(args.eps)
    counts = summary(rows)
    payload = {"claims": rows, "constants": consts, "summary": counts}
    if args.out is not None:
        from theory.plots import write_plots

        args.out.mkdir(parents=True, exist_ok=True)
        written = write_plots(args.out)
        claims_path = args.out / "claims.json"
        tmp = claims_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(payload, indent=2) + "\n")
        tmp.replace(claims_path)
        payload["files"] = [str(p) for p in [*written, claims_path]]
    if args.json:
        print(json.dumps(payload, indent=2))
    else:
        print(format_table(rows, consts, counts))
        if args.out is not None:
            print(f"\nwrote {len(payload['files'])} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
