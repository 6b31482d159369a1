"""The ``mobile-ep`` command line (:mod:`mobile_ep.cli.main`).

Ctrl-C before a command starts (while modules load) ends the process at once, with the usual line and exit
code 130; once a command runs, its own handling takes over (outputs cleaned up, then the same line).
"""

import os
import signal
import sys

__all__: list[str] = []


def _interrupted_while_starting(signum, frame):  # pragma: no cover - timing
    sys.stderr.write("mobile-ep: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


# Only as the program (the ``mobile-ep`` script, or ``python -m mobile_ep.cli`` while it starts), never in an
# application or a test run that imports this package.
_PROGRAM = os.path.basename(sys.argv[0]) in ("mobile-ep", "mobile-ep.exe", "-m") if sys.argv else False
if _PROGRAM and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    try:
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    except ValueError:  # (not the main thread: an application importing us)
        pass
