"""The `portlayer` command. Each subcommand lives in its own package and is imported only when run."""

from __future__ import annotations

import importlib
import sys

import click

from portlayer.errors import PortlayerError

# name -> (module, attribute, extra that installs its dependencies). Adding a subcommand is adding a row.
SUBCOMMANDS = {
    "doctor": ("portlayer.doctor", "doctor", None),
    "preflight": ("reference_train.preflight_cli", "preflight", "train"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(SUBCOMMANDS))

    def get_command(self, ctx: click.Context, name: str):
        if name not in SUBCOMMANDS:
            return super().get_command(ctx, name)
        module_name, attribute, extra = SUBCOMMANDS[name]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if extra is None or exc.name is None or exc.name.split(".")[0] == module_name.split(".")[0]:
                raise
            raise click.ClickException(
                f"'portlayer {name}' needs {exc.name}: pip install 'portlayer[{extra}]'"
            ) from None
        return getattr(module, attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="portlayer", prog_name="portlayer")
def cli() -> None:
    """Move PyTorch training off NVIDIA: migrate the code, run it anywhere, check the loss matches."""


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="portlayer")
    except PortlayerError as exc:
        click.echo(f"portlayer: error: {exc}", err=True)
        sys.exit(2)
