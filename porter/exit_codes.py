"""porter's exit statuses, in one table (after pip's `status_codes.py`).

What a script or CI job may rely on; every command and error class takes its status from here,
and the architecture section of the README lists the same table (tests/test_conventions.py keeps
them equal).
"""

from __future__ import annotations

OK = 0             # done, nothing to do, or every test passed
FAILED = 1         # ran and the answer is no: a test failed or xpassed, a check found something,
                   # a port is incomplete or would be broken (nothing written)
BAD_INPUT = 2      # bad input or an inconsistent tree (PorterError): nothing run, nothing written
INTERNAL = 70      # EX_SOFTWARE: a porter bug (the one-line message says so)
INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C (an edit in progress is finished first)
BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool cut off by `| head`
