"""Every code `portlayer preflight` reports, in one table.

Codes never change meaning once released; `docs/preflight-codes.md` is generated from this table
(`python -m portlayer.preflight.codes > docs/preflight-codes.md`) and a test keeps the two in sync.
Ranges: PF1xx the ops of the step, PF2xx its memory per rank, PF3xx its communication. Stdlib only: the CLI imports it early.
"""

from __future__ import annotations

from typing import NamedTuple


class Code(NamedTuple):
    severity: str  # "error" | "warning" | "info"
    title: str  # what the code means in general (SARIF's rule description, CSV's operation type)
    where: str  # the place a finding with this code points at


CODES: dict[str, Code] = {
    "PF101": Code("error", "op without a native kernel",
                  "the op's first origin: it would fall back to the cpu or fail there"),
    "PF102": Code("warning", "dtype the target lacks", "the op's first origin (float64, complex128, …)"),
    "PF103": Code("info", "ops not checked", "the model's config: no kernel list for the target here"),
    "PF201": Code("error", "memory does not fit", "the model's config; the hint says what would fit"),
    "PF202": Code("info", "memory fits", "the model's config"),
    "PF203": Code("info", "memory per rank", "the model's config: the peak per rank and what holds it"),
    "PF301": Code("info", "collectives per rank and step",
                  "the model's config: one kind over one group (tp, dp, pp) in one phase, how many and how large"),
}


def markdown() -> str:
    """The codes table as Markdown: the body of docs/preflight-codes.md."""
    lines = [
        "# `portlayer preflight` codes",
        "",
        "Generated from `portlayer/preflight/codes.py` by",
        "`python -m portlayer.preflight.codes > docs/preflight-codes.md`.",
        "Each finding is printed as `path:line:col: PFnnn message` (`--output-format text`), or in the",
        "json, csv, sarif and github formats `portlayer migrate` shares.",
        "",
        "| code | severity | meaning | points at |",
        "| --- | --- | --- | --- |",
    ]
    for code, row in CODES.items():
        lines.append(f"| {code} | {row.severity} | {row.title} | {row.where} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
