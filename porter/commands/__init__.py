"""One module per command: `HELP`, `add_arguments(parser)`, `run(args) -> int`.

The top of the import graph: a command may import any package; none imports a command
(`porter.cli` imports only the one it runs). Two modules are no command: `common` (the
arguments and steps the editing commands share) and `before_writing` (the checks they run on
a planned port between planning and writing).

May import: `porter` (its version), `porter.source`, `porter.port`, `porter.apply`,
`porter.survey`, `porter.checks`, `porter.dispatch`, `porter.emulate`, `porter.harness`,
`porter.review`, `porter.runtime`, `porter.errors`, `porter.exit_codes`. Never `porter.cli`,
which imports them.
"""
