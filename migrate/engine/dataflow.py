"""One step of data flow over CPython's tree of the whole file, for what the rules cannot see in the
statements they are shown:

- names that provably hold an int device index (`self.gpu_id = int(os.environ["LOCAL_RANK"])`, a
  parameter `gpu_id: int`, `device_id = rank % torch.cuda.device_count()`, `device = 0`): an int given
  as a device means a CUDA device, so `.to(self.gpu_id)` becomes `.to(<device gpu_id>)`;
- names inside a function assigned a CUDA device string once and read only where a device goes
  (`loc = f"cuda:{i}"` then `torch.load(path, map_location=loc)`): the string is a device.

Names are dotted (`self.gpu_id`) and matched by their text across the file, which is what an attribute
set in `__init__` and read in another method needs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from portlayer.migrate.results import Diagnostic

# Calls that return an int: `int(...)`, `len(...)`, the distributed rank and the device index queries.
_INT_CALLS = {"int", "len", "get_rank", "get_local_rank", "get_world_size", "current_device", "device_count",
              "current_device_index", "local_rank"}
_INDEX_OPERATORS = (ast.Mod, ast.FloorDiv, ast.Add, ast.Sub, ast.Mult)
_DEVICE_KEYWORDS = {"device", "map_location"}


@dataclass
class DataFlow:
    int_names: set[str] = field(default_factory=set)
    # Names that hold a list of ints (`device_ids = list(range(a, b))`): an item of one is an int.
    int_lists: set[str] = field(default_factory=set)
    # Lines of `name = "cuda..."` assignments whose name is read only as a device.
    device_string_lines: set[int] = field(default_factory=set)
    # `device = 0` (line, column 1-based, name) where the name is given as a device somewhere.
    int_devices: list[tuple[int, int, str]] = field(default_factory=list)


def dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


# `device = 0`, `self.device_id: int = 1`: a device held as an int, where the file has one.
_INT_DEVICE = re.compile(r"device\w*\s*(?::\s*int\s*)?=\s*\d", re.IGNORECASE)


def find_data_flow(tree: ast.Module, source: str, index_names: bool) -> DataFlow:
    """`index_names`: the code reads a name like a GPU index (the int names are needed only then)."""
    flow = DataFlow()
    if not index_names and _INT_DEVICE.search(source) is None:
        if "cuda:" in source:
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    _device_strings(node, flow)
        return flow
    assignments: list[tuple[str, ast.expr]] = []
    given_as_device: set[str] = set()
    int_literals: list[tuple[ast.stmt, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            given_as_device.update(filter(None, map(dotted, device_arguments(node))))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                if isinstance(arg.annotation, ast.Name) and arg.annotation.id == "int":
                    flow.int_names.add(arg.arg)
            if "cuda:" in source:
                _device_strings(node, flow)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = dotted(node.targets[0])
            if name is not None:
                assignments.append((name, node.value))
                if "device" in name.rsplit(".", 1)[-1].lower() and _is_int(node.value, set()):
                    int_literals.append((node, name))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            name = dotted(node.target)
            if name is not None:
                assignments.append((name, node.value))
    # Two passes: `self.gpu_id = gpu_id` after `gpu_id: int`, or after `gpu_id = int(...)`.
    for _ in range(2):
        for name, value in assignments:
            if _is_int(value, flow.int_names):
                flow.int_names.add(name)
            elif _is_int_list(value, flow.int_names):
                flow.int_lists.add(name)
    flow.int_devices = [(node.lineno, node.col_offset + 1, name) for node, name in int_literals
                        if name in given_as_device]
    return flow


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


def _device_strings(function: ast.FunctionDef | ast.AsyncFunctionDef, flow: DataFlow) -> None:
    """`name = "cuda..."` assigned once in `function` and read only as a device there."""
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
    for name, assignment in assigned.items():
        if (stores.get(name) == 1 and _is_cuda_string(assignment.value) and reads.get(name)
                and reads[name] == device_reads.get(name)):
            flow.device_string_lines.add(assignment.lineno)


def device_arguments(call: ast.Call) -> list[ast.expr]:
    """The arguments of `call` that are devices: `device=`, `map_location=`, `.to(x)`, `torch.device(x)`."""
    found = [keyword.value for keyword in call.keywords if keyword.arg in _DEVICE_KEYWORDS]
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("to", "device") and call.args:
        found.append(call.args[0])
    return found


def int_device_diagnostics(flow: DataFlow, excluded: frozenset[int]) -> list[Diagnostic]:
    """PL412 at `device = 0` (a device held as an int index) whose uses the rules do not see."""
    return [Diagnostic.of("PL412", line, col, f"{name} holds an int and is given as a device: an int there means "
                                              "a CUDA device")
            for line, col, name in flow.int_devices if line not in excluded]
