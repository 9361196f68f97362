"""One module per command: `HELP`, `add_arguments(parser)`, `run(args) -> int`."""
