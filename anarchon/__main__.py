"""``python -m anarchon``: the ``anarchon`` command."""

import sys

from .cli.commands import main

sys.exit(main())
