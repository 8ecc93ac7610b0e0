"""`portlayer doctor`: what a person checks first on a new cluster, as a report to paste into an issue
(like `accelerate env`): the versions of everything involved, then the backend, devices and a live check."""

from __future__ import annotations

import json
import platform
import time
from importlib import metadata

import click


def _version(distribution: str | None) -> str | None:
    if distribution is None:
        return None
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        import sys

        module = sys.modules.get(distribution)
        return getattr(module, "__version__", None)


def _collective_built(name: str) -> bool:
    import torch.distributed as dist

    if not dist.is_available():
        return False
    specific = getattr(dist, f"is_{name}_available", None)
    if specific is not None:
        return bool(specific())
    return bool(dist.is_backend_available(name))


def _live_check() -> dict:
    """Allocate, compute and synchronize on the device; compare the result with the host's."""
    import torch

    import portlayer

    try:
        start = time.perf_counter()
        generator = torch.Generator().manual_seed(0)
        host_a, host_b = (
            torch.randn(256, 256, generator=generator),
            torch.randn(256, 256, generator=generator),
        )
        device = portlayer.device()
        product = host_a.to(device) @ host_b.to(device)
        portlayer.synchronize()
        elapsed_ms = (time.perf_counter() - start) * 1000
        error = (product.cpu() - host_a @ host_b).abs().max().item()
    except Exception as exc:  # the report must say what broke, not crash
        # Kernel errors run to pages; their first sentence names the op and the backend.
        first_sentence = str(exc).strip().splitlines()[0].split(". ")[0] if str(exc).strip() else ""
        return {"ok": False, "detail": f"{type(exc).__name__}: {first_sentence}"}
    ok = error < 1e-2
    detail = (
        f"256x256 matmul on {device}, max abs error vs host {error:.1e}, synchronize ok, {elapsed_ms:.1f} ms"
    )
    return {"ok": ok, "detail": detail, "max_abs_error": error, "elapsed_ms": elapsed_ms}


def report(live_check: bool = True) -> dict:
    import torch

    import portlayer
    from portlayer import runtime

    selection = runtime.selection()
    backend = selection.backend
    # The devices work can be placed on: the cpu counts here, though `device_count()` answers 0 there.
    count = backend.count_devices(selection.module)
    return {
        "portlayer": portlayer.__version__,
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "os": platform.platform(),
        # Read from the installed metadata: importing transformers would cost seconds for one string.
        "transformers": _version("transformers"),
        "backend": backend.as_dict(),
        "reason": selection.reason,
        "probes": [
            {"backend": p.backend, "available": p.available, "detail": p.detail} for p in selection.probes
        ],
        "torch": torch.__version__,
        "vendor": {"module": backend.vendor_module, "version": _version(backend.vendor_module)},
        "devices": [{"index": i, "name": portlayer.get_device_name(i)} for i in range(count)],
        "collective": {"name": backend.dist_backend, "built": _collective_built(backend.dist_backend)},
        "visible_devices": {"env": backend.visible_devices_env, "value": backend.visible_devices()},
        "env_translated": [v._asdict() for v in selection.env_applied],
        "check": _live_check() if live_check else None,
    }


# Text mode is a fenced block: pasted into an issue or a chat it keeps its alignment.
FENCE = "```"


def format_report(data: dict) -> str:
    backend = data["backend"]
    skipped = [f"{p['backend']}: {p['detail']}" for p in data["probes"] if not p["available"]]
    lines = [
        f"{FENCE}text",
        f"portlayer    {data['portlayer']}",
        f"python       {data['python']}",
        f"os           {data['os']}",
        f"torch        {data['torch']}",
        f"transformers {data['transformers'] or 'not installed'}",
        f"backend      {backend['name']}  ({data['reason']})",
        *([f"probed       {'; '.join(skipped)}"] if skipped else []),
        f"devices      {len(data['devices'])}: "
        + ", ".join(f"[{d['index']}] {d['name']}" for d in data["devices"]),
        f"vendor       {data['vendor']['module'] or '-'} {data['vendor']['version'] or ''}".rstrip(),
        f"collective   {data['collective']['name']} "
        + (
            "(available in this torch build)"
            if data["collective"]["built"]
            else "(NOT available in this torch build)"
        ),
        f"visible      {data['visible_devices']['env']}={data['visible_devices']['value'] or '<unset>'}",
    ]
    for variable in data["env_translated"]:
        lines.append(f"translated   {variable['target']}={variable['value']} (from {variable['source']})")
    if data["check"] is not None:
        lines.append(f"check        {'ok' if data['check']['ok'] else 'FAILED'}: {data['check']['detail']}")
    lines.append(FENCE)
    return "\n".join(lines)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--no-check", is_flag=True, help="Skip the live allocate/compute/synchronize check.")
def doctor(as_json: bool, no_check: bool) -> None:
    """Report the versions, the backend portlayer selects here and why, and check that it computes.

    The text is a fenced block to paste into an issue; --json is the same report for scripts.
    Exit 1 when the live check fails."""
    data = report(live_check=not no_check)
    click.echo(json.dumps(data, indent=2) if as_json else format_report(data))
    if data["check"] is not None and not data["check"]["ok"]:
        raise SystemExit(1)
