"""`python -m portlayer …`, the same as the `portlayer` command."""

from portlayer.cli import main

main()
