"""What the rules ask for that needs the whole migrated text (`Requests`), done once every rule has run,
one piece each, in this order:

1. the program's own fallbacks taken (`program_fallbacks`): first, for the `try` statements they replace
   hold imports, and their `except` bodies may bind the names those imported;
2. released module-level imports that nothing reads any more removed (`imports`);
3. the statements a rule dropped removed (`dropped`);
4. unused imports inside functions and blocks removed (`imports`), after 3, which may leave one alone;
5. the target's imports added (`imports`), and 6. the names the rewritten sites read defined below them
   (`definitions`).

Each piece reads CPython's tree of the text it is given (`ParsedText`): parsed once for every piece that
leaves the text as it was, again only after one changed it, and never for a file no piece needs to read.
"""

from __future__ import annotations

from portlayer.migrate.engine.analysis import ParsedText
from portlayer.migrate.engine.context import Requests
from portlayer.migrate.engine.definitions import define
from portlayer.migrate.engine.dropped import DROPPED, drop_marked
from portlayer.migrate.engine.imports import (
    insert_imports,
    missing_imports,
    remove_unused,
    remove_unused_nested,
)
from portlayer.migrate.results import Settled


def settle(code: str, requests: Requests) -> tuple[str, list[str], Settled]:
    """`code` (the migrated module) with the requests done, the modules whose import was added, and the
    size of what settling rewrote."""
    text = ParsedText(code)
    dedented = imports = 0
    if requests.fallbacks is not None and any(requests.fallbacks.taken):
        taken, dedented = requests.fallbacks.take(text)
        text.replace(taken)
    if requests.released:
        narrowed, imports = remove_unused(text, requests.released)
        text.replace(narrowed)
    if DROPPED in text.code:
        text.replace(drop_marked(text))
    narrowed, nested = remove_unused_nested(text, requests.converted_libraries)
    text.replace(narrowed)
    missing = missing_imports(text.tree, requests.added) if requests.added else []
    if missing:
        text.replace(insert_imports(text, missing))
    if requests.defined:
        text.replace(define(text, requests.defined))
    return text.code, missing, Settled(imports + nested, dedented)
