"""The `portlayer` command. Each subcommand lives in its own package and is imported only when run."""

from __future__ import annotations

import importlib
import sys

import click

from portlayer.errors import PortlayerError, fail

# name -> (module, attribute, extra that installs its dependencies). Adding a subcommand is adding a row.
SUBCOMMANDS = {
    "doctor": ("portlayer.doctor", "doctor", None),
    "migrate": ("portlayer.migrate.cli", "migrate", "migrate"),
    "parity": ("portlayer.train.cli", "parity", "train"),
    "preflight": ("portlayer.preflight.cli", "preflight", "train"),
}

# Source folders that install under portlayer's name: a checkout on sys.path without an install lacks them.
_MAPPED_PACKAGES = {"portlayer.migrate": "migrate", "portlayer.train": "reference_train"}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when one of them runs (or help lists them)."""

    def __init__(self, *args, lazy_subcommands: dict[str, tuple[str, str, str | None]], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = lazy_subcommands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_subcommands))

    def get_command(self, ctx: click.Context, name: str):
        if name not in self.lazy_subcommands:
            return super().get_command(ctx, name)
        module_name, attribute, extra = self.lazy_subcommands[name]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name in _MAPPED_PACKAGES:
                raise click.ClickException(
                    f"'portlayer {name}' needs {exc.name}, which only an installed portlayer has "
                    f"(setup.py maps {_MAPPED_PACKAGES[exc.name]}/ to it): pip install -e '.[{extra}]' in this checkout"
                ) from None
            if extra is None or exc.name is None or exc.name.split(".")[0] == module_name.split(".")[0]:
                raise
            raise click.ClickException(
                f"'portlayer {name}' needs {exc.name}: pip install 'portlayer[{extra}]'"
            ) from None
        return getattr(module, attribute)


@click.group(
    cls=LazyGroup, lazy_subcommands=SUBCOMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="portlayer", prog_name="portlayer")
def cli() -> None:
    """Move PyTorch training off NVIDIA: migrate the code, run it anywhere, check the loss matches."""


def main(argv: list[str] | None = None) -> None:
    """Every failure a user can fix ends as one line on stderr: bad arguments and a missing backend exit 2."""
    try:
        status = cli.main(args=argv, prog_name="portlayer", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        # `portlayer` or `portlayer parity` alone: the usage, as git and ruff print it, not an error line.
        exc.show()
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        fail("interrupted", 130)  # Ctrl-C (click turns KeyboardInterrupt into Abort): 128 + SIGINT
    except PortlayerError as exc:
        fail(str(exc), 2)
    sys.exit(status if isinstance(status, int) else 0)


class UnusableInput(click.ClickException):
    """Input a subcommand cannot use (a missing or corrupt file, a bad combination): one line, exit 2."""

    exit_code = 2
