"""One module per command: `HELP`, `add_arguments(parser)`, `run(args) -> int`.

The top of the import graph: a command may import any package; none imports a command
(`porter.cli` imports only the one it runs). Shared argument helpers live in `common`.
"""
