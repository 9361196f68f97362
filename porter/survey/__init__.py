"""What is left, and where one op stands: `port_candidates` (every op still to port) and
`op_status` (one op, with the next command to run).

May import: `porter.source` (`op_kind`: the classification the editing commands use, with
candidates' wider net), `porter.port` (resolve, for status), `porter.checks`,
`porter.errors`. Never `porter.commands`.
"""
