"""What is left, and where one op stands: `candidates` (every op still to port) and
`op_status` (one op, with the next command to run).

May import: `porter.source`, `porter.port` (the same classification the editing commands use),
`porter.checks`. Never `porter.commands`.
"""
