"""Findings (a code at a place in a file, with a message and a hint) in the formats tools and CI read.

Shared by `portlayer migrate` and `portlayer preflight`: each turns its results into `Finding`s and calls
`render`. Stdlib only, and cheap to import.

- `text`: `path:line:col: CODE message`, its hint on the next line (gcc, ruff).
- `json`: a list of objects, one per finding, in the order given.
- `csv`: the columns of Ascend msFmkTransplt's reports (`change_list.csv`: File, Start Line, End Line,
  Operation Type, Message; written by `write_csv` in its `utils/trans_utils.py`), so that teams who know
  that tool read ours; then Code, Severity, Column and Hint.
- `sarif`: SARIF 2.1.0 (OASIS), one run, a rule per code, for code-scanning dashboards.
- `github`: GitHub Actions workflow commands (`::warning file=…,line=…,col=…,title=…::message`), which
  annotate the pull request's diff.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

FORMATS = ("text", "json", "csv", "sarif", "github")
CSV_COLUMNS = (
    "File", "Start Line", "End Line", "Operation Type", "Message", "Code", "Severity", "Column", "Hint",
)
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# A finding's severity: a diagnostic's "error" | "warning" | "info", or "change" for a conversion made.
_SARIF_LEVELS = {"error": "error", "warning": "warning", "info": "note", "change": "note"}
_GITHUB_COMMANDS = {"error": "error", "warning": "warning", "info": "notice", "change": "notice"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int  # 1-based
    col: int  # 1-based
    code: str
    severity: str
    message: str
    hint: str = ""
    title: str = ""  # what the code means in general (SARIF's rule description, CSV's operation type)


def text_lines(finding: Finding, *, hint: bool = True) -> str:
    line = f"{finding.path}:{finding.line}:{finding.col}: {finding.code} {finding.message}"
    return f"{line}\n  hint: {finding.hint}" if hint and finding.hint else line


def render(fmt: str, findings: Sequence[Finding], *, tool: str = "portlayer", version: str = "") -> str:
    """All of `findings` as one document in `fmt` (one of FORMATS), ending with a newline if not empty."""
    if fmt == "text":
        return "".join(text_lines(f) + "\n" for f in findings)
    if fmt == "json":
        return json.dumps([asdict(f) for f in findings], indent=2) + "\n"
    if fmt == "csv":
        return _csv(findings)
    if fmt == "sarif":
        return json.dumps(sarif(findings, tool=tool, version=version), indent=2) + "\n"
    if fmt == "github":
        return "".join(github_line(f) + "\n" for f in findings)
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _csv(findings: Iterable[Finding]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for f in findings:
        writer.writerow(
            [f.path, f.line, f.line, f.title or f.code, f.message, f.code, f.severity, f.col, f.hint]
        )
    return out.getvalue()


def sarif(findings: Sequence[Finding], *, tool: str, version: str) -> dict:
    codes = sorted({f.code for f in findings})
    first = {code: next(f for f in findings if f.code == code) for code in codes}
    driver: dict = {"name": tool, "rules": [
        {
            "id": code,
            "shortDescription": {"text": first[code].title or code},
            **({"help": {"text": first[code].hint}} if first[code].hint else {}),
        }
        for code in codes
    ]}
    if version:
        driver["version"] = version
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": codes.index(f.code),
            "level": _SARIF_LEVELS.get(f.severity, "warning"),
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(f.path)},
                        "region": {"startLine": max(f.line, 1), "startColumn": max(f.col, 1)},
                    }
                }
            ],
        }
        for f in findings
    ]
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}


def _uri(path: str) -> str:
    """A relative path as a SARIF `uri` (forward slashes, percent-encoded where a URI needs it)."""
    from urllib.parse import quote

    return quote(path.replace("\\", "/"))


def github_line(f: Finding) -> str:
    # Workflow commands escape %, CR and LF in the message, and also `,` and `:` in property values.
    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    command = _GITHUB_COMMANDS.get(f.severity, "warning")
    message = f"{f.message} (hint: {f.hint})" if f.hint else f.message
    return (
        f"::{command} file={prop(f.path)},line={f.line},col={f.col},title={prop(f.code)}::{data(message)}"
    )
