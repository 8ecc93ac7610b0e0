"""What preflight found: the ops the target lacks, the dtypes it handles badly, and a verdict."""

from __future__ import annotations

from dataclasses import dataclass

from portlayer.backends import BY_NAME
from portlayer.preflight.kernels import KernelSource, classify
from portlayer.preflight.recording import OpUse, Recording


@dataclass(frozen=True)
class CheckedOp:
    use: OpUse
    status: str  # "native", "composite" or "missing"

    def as_dict(self) -> dict:
        use = self.use
        return {
            "op": use.op,
            "status": self.status,
            "count": use.count,
            "dtypes": sorted(use.dtypes),
            "phases": [phase for phase in ("forward", "backward", "optimizer") if phase in use.phases],
            "recorded_as": sorted(use.recorded_as),
            "first": use.first.as_dict(),
        }


@dataclass(frozen=True)
class DtypeRisk:
    use: OpUse
    dtype: str
    why: str

    def as_dict(self) -> dict:
        return {"op": self.use.op, "dtype": self.dtype, "count": self.use.count, "why": self.why,
                "first": self.use.first.as_dict()}


@dataclass(frozen=True)
class Report:
    target: str
    source: KernelSource
    ops: tuple  # CheckedOp, in order of first dispatch

    @classmethod
    def build(cls, recording: Recording, source: KernelSource) -> Report:
        return cls(source.target, source, tuple(CheckedOp(use, classify(use.op, source))
                                                for use in recording.ops.values()))

    @property
    def missing(self) -> list[CheckedOp]:
        return [checked for checked in self.ops if checked.status == "missing"]

    @property
    def dtype_risks(self) -> list[DtypeRisk]:
        risky = BY_NAME[self.target].dtype_risks  # dtypes the target lacks or emulates, and why
        return [DtypeRisk(checked.use, dtype, risky[dtype])
                for checked in self.ops for dtype in sorted(checked.use.dtypes) if dtype in risky]

    @property
    def exit_code(self) -> int:
        """0 when everything runs natively, 1 when something would fall back to the cpu or fail."""
        return 1 if self.missing or self.dtype_risks else 0

    def verdict(self) -> str:
        total = len(self.ops)
        composite = sum(checked.status == "composite" for checked in self.ops)
        risky_ops = len({risk.use.op for risk in self.dtype_risks})
        if self.exit_code == 0:
            found = f"all {total} ops native ({composite} composite), no dtype risks"
        else:
            found = f"{len(self.missing)} of {total} ops would fall back to the cpu or fail"
            if risky_ops:
                found += f", {risky_ops} use a dtype the target lacks"
        return f"preflight {self.target}: {found} (source: {self.source.label})"

    def render(self) -> str:
        """The text the CLI prints: missing ops, dtype risks, the source's caveat, the verdict."""
        lines = []
        if self.missing:
            lines.append(f"missing on {self.target}:")
            width = max(len(checked.use.op) for checked in self.missing)
            for checked in self.missing:
                use = checked.use
                lines.append(f"  {use.op:<{width}}  x{use.count:<4} {','.join(sorted(use.dtypes)) or '-':<16} "
                             f"{use.first.describe()}")
        if self.dtype_risks:
            lines.append("dtype risks:")
            for risk in self.dtype_risks:
                lines.append(f"  {risk.use.op} {risk.dtype} x{risk.use.count}  {risk.use.first.describe()}")
                lines.append(f"    {risk.why}")
        if self.source.caveat:
            lines.append(f"caveat: {self.source.caveat}")
        lines.append(self.verdict())
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "source": self.source.as_dict(),
            "verdict": self.verdict(),
            "exit_code": self.exit_code,
            "calls": sum(checked.use.count for checked in self.ops),
            "missing": [checked.as_dict() for checked in self.missing],
            "dtype_risks": [risk.as_dict() for risk in self.dtype_risks],
            "ops": [checked.as_dict() for checked in self.ops],
        }
