"""Planning a port: from an op name to the planned texts, in memory.

`resolve` gathers every fact about one op into an `OpSpec`, refusing the kinds of op that
`porter.source.op_kind` says it cannot port; `plan` (new-op) and `migration`
(migrate-from-mpsgraph) turn it into a `ChangeSet`; `functor`, `body` and `selectors` write the
Metal functor; `edits/` holds the pure text edits, one module per file kind; `validate` and
`torchgen_check` check the planned texts before anything is written; `templates` renders the
Jinja2 templates.

May import: `porter.source`, `porter.apply.changes` (the ChangeSet it returns),
`porter.runtime`, `porter.errors`. Never `porter.commands`, `porter.survey`, `porter.checks`,
the harness or the emulator (tests/test_layout.py).
"""
