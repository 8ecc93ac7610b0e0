"""What a run did, counted: the summary line, the per-category statistics and the `--report` JSON.

Like HIPIFY's `--print-stats`, sites are counted by category, split into converted (a change was made)
and reported (a diagnostic was left for a human).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from portlayer.atomic import write_atomic
from portlayer.migrate.codes import CODES
from portlayer.migrate.job import FileResult

SEVERITIES = ("error", "warning", "info")
# The changes that are not a site rewritten: an import added (PL110), a program's fallback taken (PL120).
_REWRITE_KINDS = {"PL110": "imports", "PL120": "fallbacks"}
REPORT_VERSION = 1


@dataclass
class Tally:
    files: Counter = field(default_factory=Counter)  # status -> files, plus "scanned"
    severities: Counter = field(default_factory=Counter)
    converted: Counter = field(default_factory=Counter)  # category -> changes
    reported: Counter = field(default_factory=Counter)  # category -> diagnostics
    codes: Counter = field(default_factory=Counter)
    changes: int = 0
    # Lines rewritten by kind, as `git diff --stat` sizes a change: "sites", "imports" (statements added,
    # removed or narrowed), "fallbacks" (taken) and "dedented" (the lines they moved out of `except`).
    rewritten: Counter = field(default_factory=Counter)

    def add(self, result: FileResult) -> None:
        self.files["scanned"] += 1
        self.files[result.status] += 1
        self.changes += len(result.changes)
        for change in result.changes:
            self.converted[CODES[change.code].category] += 1
            self.codes[change.code] += 1
            self.rewritten[_REWRITE_KINDS.get(change.code, "sites")] += 1
        self.rewritten["imports"] += result.settled.imports
        self.rewritten["dedented"] += result.settled.dedented
        for diagnostic in result.diagnostics:
            self.reported[diagnostic.category] += 1
            self.severities[diagnostic.severity] += 1
            self.codes[diagnostic.code] += 1
        if result.error:  # failures without a code (I/O, internal) still count as errors
            self.severities["error"] += 1

    def summary_line(self, writing: bool) -> str:
        changed = "changed" if writing else "would change"
        severities = ", ".join(f"{self.severities[s]} {_plural(s, self.severities[s])}" for s in SEVERITIES)
        return (
            f"{self.files['scanned']} {_plural('file', self.files['scanned'])} scanned, "
            f"{self.files['changed']} {changed}, {self.files['failed']} failed; "
            f"{self.changes} {_plural('change', self.changes)}; {severities}"
        ) + (f"; {self.rewritten_line()}" if self.changes else "")

    def rewritten_line(self) -> str:
        """`rewritten: 412 sites, 37 imports, 6 fallbacks taken (84 lines dedented)`: a fallback taken
        rewrites every line of its `except` block, which a count of changed lines would take for damage."""
        counts = {kind: self.rewritten[kind] for kind in ("sites", "imports", "fallbacks", "dedented")}
        return (
            f"rewritten: {counts['sites']} {_plural('site', counts['sites'])}, "
            f"{counts['imports']} {_plural('import', counts['imports'])}, "
            f"{counts['fallbacks']} {_plural('fallback', counts['fallbacks'])} taken "
            f"({counts['dedented']} {_plural('line', counts['dedented'])} dedented)"
        )

    def statistics(self) -> str:
        """A table of sites per category, for `-v`."""
        categories = sorted(set(self.converted) | set(self.reported))
        width = max([len("category")] + [len(c) for c in categories])
        rows = [f"{'category':<{width}}  converted  reported"]
        rows += [f"{c:<{width}}  {self.converted[c]:>9}  {self.reported[c]:>8}" for c in categories]
        return "\n".join(rows)

    def summary(self) -> dict:
        return {
            "files": {key: self.files[key] for key in ("scanned", "changed", "unchanged", "failed")},
            "changes": self.changes,
            "rewritten": {kind: self.rewritten[kind] for kind in ("sites", "imports", "fallbacks", "dedented")},
            "diagnostics": {severity: self.severities[severity] for severity in SEVERITIES},
            "by_category": {
                category: {"converted": self.converted[category], "reported": self.reported[category]}
                for category in sorted(set(self.converted) | set(self.reported))
            },
            "by_code": {
                code: {"title": CODES[code].title, "count": self.codes[code]} for code in sorted(self.codes)
            },
        }


def _plural(word: str, count: int) -> str:
    if word == "info" or count == 1:
        return word
    return word + "s"


def file_entry(result: FileResult) -> dict:
    entry = {
        "path": result.path,
        "kind": result.kind,
        "status": result.status,
        "changes": [
            {"code": c.code, "line": c.line, "col": c.col, "message": c.message} for c in result.changes
        ],
        "diagnostics": [
            {
                "code": d.code,
                "line": d.line,
                "col": d.col,
                "severity": d.severity,
                "category": d.category,
                "message": d.message,
                "hint": d.hint,
            }
            for d in result.diagnostics
        ],
    }
    if result.error:
        entry["error"] = result.error
    return entry


def write_report(path: Path, tally: Tally, results: list[FileResult], target: str, writing: bool) -> None:
    """Files that changed, failed or have diagnostics are listed; clean files are only counted."""
    document = {
        "version": REPORT_VERSION,
        "target": target,
        "wrote_files": writing,
        "summary": tally.summary(),
        "files": [file_entry(r) for r in results if r.status != "unchanged" or r.changes or r.diagnostics],
    }
    write_atomic(path, (json.dumps(document, indent=2) + "\n").encode())
