"""When parity fails, name the module: `locate` (device vs a float64 cpu oracle, one process) and
`collect` / `write_dump` / `read_dump` / `diff` (per-module statistics, compared across machines).

    from portlayer.train.locate import locate
    result = locate(model, batch)          # any nn.Module and the batch it takes
    print(result.render()); result.culprit_name
"""

from portlayer.train.locate.diff import diff
from portlayer.train.locate.dump import Dump, DumpError, collect
from portlayer.train.locate.dump import read as read_dump
from portlayer.train.locate.dump import write as write_dump
from portlayer.train.locate.oracle import locate
from portlayer.train.locate.report import LocateReport

__all__ = ["Dump", "DumpError", "LocateReport", "collect", "diff", "locate", "read_dump", "write_dump"]
