"""Code that already dispatches per backend (`portlayer.migrate.engine.guards`): every rule leaves its `if`
chain alone (the engine excludes its lines), and this one says so, at info level (PL411), where the user
has not excluded the chain already."""

from __future__ import annotations

from portlayer.migrate.codes import CODES
from portlayer.migrate.engine.guards import DISPATCH_CHAINS
from portlayer.migrate.engine.regions import USER_EXCLUSIONS
from portlayer.migrate.rules.base import FileRule


class AlreadyDispatching(FileRule):
    NEEDS = (DISPATCH_CHAINS, USER_EXCLUSIONS)

    def check(self) -> None:
        title = CODES["PL411"].title
        excluded = self.fact(USER_EXCLUSIONS)
        for line, col, test in self.fact(DISPATCH_CHAINS).sites:
            if line not in excluded:
                self.report_at("PL411", line, col, f"{title} (`if {test}`)")
