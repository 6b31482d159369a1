"""``python -m mobile_ep.cli``: the mobile-ep command."""

from mobile_ep.cli.main import main

main()
