"""Training progress across the torchrun boundary, drawn with tqdm (the project's one progress library).

`portlayer parity run` reads its ranks' output through a pipe, where the trainer's own bar (a terminal only)
never shows. So the launcher sets `STEP_EVENTS_ENV`; rank 0 then prints one `step_event` line per optimizer
step, and the launcher turns those into its own bar: on a terminal from the moment it starts (start-up, the
tokenizer and the first step take seconds), nothing on a pipe, where the trainer's log lines are the record.
"""

from __future__ import annotations

import sys

STEP_EVENTS_ENV = "PORTLAYER_STEP_EVENTS"
_PREFIX = "portlayer.train.step "


def step_event(step: int, loss: float) -> str:
    return f"{_PREFIX}{step} {loss!r}"


def parse_step_event(line: str) -> tuple[int, float] | None:
    """(step, loss) from a `step_event` line, None for any other line.

    The ranks share one pipe, so another rank's output can land on the same line as an event: such a line
    is not an event, and is echoed as it came.
    """
    if not line.startswith(_PREFIX):
        return None
    fields = line[len(_PREFIX) :].split()
    try:
        step, loss = fields
        return int(step), float(loss)
    except ValueError:
        return None


class StepBar:
    """A bar over the run's steps on `stream` when it is a terminal; on a pipe, lines pass through as they are."""

    def __init__(self, steps: int, name: str, stream=None):
        from tqdm import tqdm

        stream = stream or sys.stderr
        self.name = name
        self.bar = tqdm(
            total=steps,
            desc=f"{name} (starting)",
            unit="step",
            file=stream,
            disable=not stream.isatty(),
            dynamic_ncols=True,
        )

    @property
    def shown(self) -> bool:
        return not self.bar.disable

    def line(self, text: str, echo) -> None:
        """One line of the ranks' output: a step event moves the bar, anything else is echoed above it."""
        event = parse_step_event(text)
        if event is None:
            if self.shown:
                self.bar.write(text, file=sys.stdout)  # above the bar, on stdout as the trainer wrote it
            else:
                echo(text)
            return
        step, loss = event
        self.bar.set_description(self.name, refresh=False)
        self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
        self.bar.update(step - self.bar.n)

    def close(self) -> None:
        self.bar.close()
