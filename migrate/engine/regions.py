"""Lines the user excluded from migration: `# portlayer: skip` at the end of a statement excludes that
statement; `# portlayer: off` ... `# portlayer: on` (or the end of the file) excludes a region.

Excluded code is neither rewritten nor reported: the user has marked it as reviewed.
"""

from __future__ import annotations

import io
import re
import tokenize

from portlayer.migrate.engine.facts import Fact

_DIRECTIVE = re.compile(r"#\s*portlayer:\s*(skip|off|on)\b")


def excluded_lines(source: str) -> frozenset[int]:
    if "portlayer:" not in source:
        return frozenset()
    excluded: set[int] = set()
    off_since = None
    statement_start = None
    skip_statement = False
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            kind, line = token.type, token.start[0]
            if kind == tokenize.COMMENT:
                match = _DIRECTIVE.match(token.string)
                if match is None:
                    continue
                directive = match.group(1)
                if directive == "off" and off_since is None:
                    off_since = line
                elif directive == "on" and off_since is not None:
                    excluded.update(range(off_since, line + 1))
                    off_since = None
                elif directive == "skip" and statement_start is not None:
                    skip_statement = True
            elif kind in (tokenize.NEWLINE, tokenize.ENDMARKER):
                if skip_statement:
                    excluded.update(range(statement_start, token.end[0] + 1))
                statement_start, skip_statement = None, False
            elif kind not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT) and statement_start is None:
                statement_start = line
    except (tokenize.TokenError, SyntaxError):
        pass  # the parser reports the real error; exclusions found so far still hold
    if off_since is not None:
        excluded.update(range(off_since, source.count("\n") + 2))
    return frozenset(excluded)


USER_EXCLUSIONS = Fact("the lines the user excluded", lambda file, facts: excluded_lines(file.text))
