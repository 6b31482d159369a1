"""The ``mobile-ep`` command line (:mod:`mobile_ep.cli.main`).

Ctrl-C before a command starts (while modules load) ends the process at once, with the usual line and exit
code 130 (:mod:`mobile_ep._startup`); once a command runs, its own handling takes over (outputs cleaned up,
then the same line; :mod:`mobile_ep.cli.group`).
"""

__all__: list[str] = []
