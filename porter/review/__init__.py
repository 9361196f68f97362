"""What an upstream reviewer asks of a port, written for the pull request: `porter pr` (the
description: what moved, files, verdicts, removed expectations, Mac test commands, the review
checklist) and `porter bench` (the before/after benchmark a contributor runs on a Mac).

May import: `porter.source`, `porter.checks`, `porter.harness`, `porter.emulate`,
`porter.dispatch`, `porter.port` (the Mac command of an OpInfo decorator), `porter.runtime`
(the scratch directory HEAD is checked out in), `porter.errors`.
Never the commands, which call it.
"""
