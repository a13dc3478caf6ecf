"""One module per ``harnessrl`` command: each adds its parser (``add_parser``) and runs it (``run``).

``harnessrl.cli`` builds the argparse front from ``COMMANDS`` in help order and dispatches. A command module
imports what it drives inside ``run`` so building the parser (``harnessrl --help``) loads no torch.
"""
