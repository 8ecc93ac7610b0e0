"""One step of data flow over CPython's tree of the whole file, for what the rules cannot see in the
statements they are shown; each a fact a rule declares (`portlayer.migrate.engine.facts`):

- `INT_NAMES`: names that provably hold an int device index (`self.gpu_id = int(os.environ["LOCAL_RANK"])`,
  a parameter `gpu_id: int`, `device_id = rank % torch.cuda.device_count()`, `device = 0`), and names that
  hold a list of them: an int given as a device means a CUDA device, so `.to(self.gpu_id)` becomes
  `.to(<device gpu_id>)`;
- `DEVICE_STRINGS`: names inside a function assigned a CUDA device string once and read only where a
  device goes (`loc = f"cuda:{i}"` then `torch.load(path, map_location=loc)`): the string is a device;
- `CURRENT_DEVICES_HELD`: likewise `device = torch.cuda.current_device()` read only where a device goes: the
  int is a device there;
- `INT_DEVICE_ASSIGNMENTS`: `device = 0` (or `= torch.cuda.current_device()`), an int held by a name
  given as a device, whose uses may be anywhere.

Names are dotted (`self.gpu_id`) and matched by their text across the file, which is what an attribute
set in `__init__` and read in another method needs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from portlayer.migrate.engine.facts import Fact
from portlayer.migrate.engine.names import dotted

# Calls that return an int: `int(...)`, `len(...)`, the distributed rank and the device index queries.
_INT_CALLS = {"int", "len", "get_rank", "get_local_rank", "get_world_size", "current_device", "device_count",
              "current_device_index", "local_rank"}
_INDEX_OPERATORS = (ast.Mod, ast.FloorDiv, ast.Add, ast.Sub, ast.Mult)
_DEVICE_KEYWORDS = {"device", "map_location"}
# `device = 0`, `self.device_id: int = 1`, `device = get_accelerator().current_device()`: a device held as
# an int, where the file may have one (the test of a file that has none costs no walk of its tree).
_INT_DEVICE = re.compile(r"device\w*\s*(?::\s*int\s*)?=\s*(?:\d|[\w.()]*?\b(?:"
                         + "|".join(sorted(_INT_CALLS)) + r")\s*\()", re.IGNORECASE)


@dataclass(frozen=True)
class IntNames:
    names: frozenset[str]  # that hold an int
    lists: frozenset[str]  # that hold a list of ints (`device_ids = list(range(a, b))`): an item of one is an int


def find_int_names(tree: ast.Module) -> IntNames:
    names: set[str] = set()
    lists: set[str] = set()
    assignments: list[tuple[str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                if isinstance(arg.annotation, ast.Name) and arg.annotation.id == "int":
                    names.add(arg.arg)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = dotted(node.targets[0])
            if name is not None:
                assignments.append((name, node.value))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            name = dotted(node.target)
            if name is not None:
                assignments.append((name, node.value))
    # Two passes: `self.gpu_id = gpu_id` after `gpu_id: int`, or after `gpu_id = int(...)`.
    for _ in range(2):
        for name, value in assignments:
            if _is_int(value, names):
                names.add(name)
            elif _is_int_list(value, names):
                lists.add(name)
    return IntNames(frozenset(names), frozenset(lists))


def find_int_device_assignments(tree: ast.Module, source: str) -> tuple[tuple[int, int, str], ...]:
    """`device = 0` (line, column 1-based, name): an int assigned to a name whose last part names a
    device, where the file gives that name as a device."""
    if _INT_DEVICE.search(source) is None:
        return ()
    given_as_device: set[str] = set()
    assigned: list[tuple[ast.Assign, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            given_as_device.update(filter(None, map(dotted, device_arguments(node))))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = dotted(node.targets[0])
            if name is not None and "device" in name.rsplit(".", 1)[-1].lower() and _is_int(node.value, set()):
                assigned.append((node, name))
    return tuple((node.lineno, node.col_offset + 1, name) for node, name in assigned if name in given_as_device)


def find_device_strings(tree: ast.Module, source: str) -> frozenset[int]:
    """The lines of `name = "cuda..."` assignments whose name is read only as a device in its function."""
    return _held_only_as_devices(tree, _is_cuda_string) if "cuda:" in source else frozenset()


def find_current_devices_held(tree: ast.Module, source: str) -> frozenset[int]:
    """The lines of `name = torch.cuda.current_device()` whose name is read only as a device in its function
    (Megatron-LM's `device = torch.cuda.current_device()`, then `torch.zeros(..., device=device)`)."""
    return _held_only_as_devices(tree, _is_cuda_current_device) if "current_device" in source else frozenset()


def _held_only_as_devices(tree: ast.Module, holds) -> frozenset[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(_read_only_as_devices(node, holds))
    return frozenset(lines)


def _is_int(value: ast.expr, known: set[str]) -> bool:
    if isinstance(value, ast.Constant):
        return type(value.value) is int
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        return name in _INT_CALLS
    if isinstance(value, ast.BinOp) and isinstance(value.op, _INDEX_OPERATORS):
        return _is_int(value.left, known) and (isinstance(value.op, ast.Mod) or _is_int(value.right, known))
    return dotted(value) in known


def _is_int_list(value: ast.expr, known: set[str]) -> bool:
    """`range(...)`, `list(range(...))`, or a list or tuple display of ints."""
    if isinstance(value, (ast.List, ast.Tuple)):
        return bool(value.elts) and all(_is_int(element, known) for element in value.elts)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        if value.func.id == "range":
            return True
        return value.func.id == "list" and len(value.args) == 1 and _is_int_list(value.args[0], known)
    return False


def _is_cuda_string(value: ast.expr) -> bool:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value == "cuda" or value.value.startswith("cuda:")
    if isinstance(value, ast.JoinedStr) and value.values:
        first = value.values[0]
        return isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("cuda:")
    return False


def _is_cuda_current_device(value: ast.expr) -> bool:
    return isinstance(value, ast.Call) and not value.args and dotted(value.func) == "torch.cuda.current_device"


def _read_only_as_devices(function: ast.FunctionDef | ast.AsyncFunctionDef, holds) -> list[int]:
    """The lines of `name = <value>` assigned once in `function`, where `holds(value)`, and read only as a
    device there."""
    stores: dict[str, int] = {}
    assigned: dict[str, ast.Assign] = {}
    reads: dict[str, int] = {}
    device_reads: dict[str, int] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            counts = stores if isinstance(node.ctx, ast.Store) else reads
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node
        elif isinstance(node, ast.Call):
            for argument in device_arguments(node):
                if isinstance(argument, ast.Name):
                    device_reads[argument.id] = device_reads.get(argument.id, 0) + 1
    return [assignment.lineno for name, assignment in assigned.items()
            if stores.get(name) == 1 and holds(assignment.value) and reads.get(name)
            and reads[name] == device_reads.get(name)]


def device_arguments(call: ast.Call) -> list[ast.expr]:
    """The arguments of `call` that are devices: `device=`, `map_location=`, `.to(x)`, `torch.device(x)`."""
    found = [keyword.value for keyword in call.keywords if keyword.arg in _DEVICE_KEYWORDS]
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("to", "device") and call.args:
        found.append(call.args[0])
    return found


INT_NAMES = Fact("the names that hold an int or a list of ints", lambda file, facts: find_int_names(file.tree))
DEVICE_STRINGS = Fact("the CUDA device strings read only as devices",
                      lambda file, facts: find_device_strings(file.tree, file.text))
CURRENT_DEVICES_HELD = Fact("the torch.cuda.current_device() held by names read only as devices",
                            lambda file, facts: find_current_devices_held(file.tree, file.text))
INT_DEVICE_ASSIGNMENTS = Fact("the int literals held by names given as devices",
                              lambda file, facts: find_int_device_assignments(file.tree, file.text))
