"""What the rules know of the whole file while they look at some of its statements (`FileContext`),
and what they ask of it once all of them have run (`Requests`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from portlayer.migrate.engine.analysis import ImportSpec, ModuleImports
from portlayer.migrate.engine.facts import Fact, Facts
from portlayer.migrate.engine.guards import DISPATCH_CHAINS
from portlayer.migrate.engine.program_fallbacks import FallbackChoice
from portlayer.migrate.engine.regions import USER_EXCLUSIONS
from portlayer.migrate.engine.scopes import Scope
from portlayer.migrate.targets import Target

# The lines no rule rewrites or reports: the user's exclusions and the `if` chains that already dispatch.
EXCLUDED_LINES = Fact("the lines no rule touches",
                      lambda file, facts: facts[USER_EXCLUSIONS] | facts[DISPATCH_CHAINS].lines)


@dataclass(frozen=True)
class FileContext:
    target: Target
    module: ModuleImports  # the module-level imports
    scopes: Scope
    file_line: Callable[[int], int | None]  # a line of the code the rules see -> the file's
    excluded_lines: frozenset[int]  # EXCLUDED_LINES
    facts: Facts  # the rest, for the rules that declare them (`NEEDS`)


@dataclass
class Requests:
    """What the rules ask for that only the whole migrated text can take: done once every rule has run
    (`portlayer.migrate.engine.settle`), so that no rule shifts the lines another reports."""

    added: set[str] = field(default_factory=set)  # modules to import (`portlayer`, `torch_npu`)
    released: set[ImportSpec] = field(default_factory=set)  # module-level imports a rewrite may leave unused
    # CUDA-only libraries (top-level packages) some of whose calls a rule rewrote: their imports inside
    # functions and blocks go too once nothing there reads their names.
    converted_libraries: set[str] = field(default_factory=set)
    # Names bound by CUDA-only library imports whose every use a rule converted: the import goes with the
    # rewrite, so the rule that reports library imports, which runs later, does not.
    converted_names: set[str] = field(default_factory=set)
    # Module-level names the rewritten sites read (`DEVICE_TYPE`) -> the expression each is defined as.
    defined: dict[str, str] = field(default_factory=dict)
    fallbacks: FallbackChoice | None = None  # the program's own fallbacks that give way
