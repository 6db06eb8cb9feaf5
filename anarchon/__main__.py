"""``python -m anarchon``: the ``anarchon`` command."""

import sys

from .cli import main

sys.exit(main())
