"""Worked examples of extending gmc-grpo (not imported by the package)."""
