"""``python -m anarchon_dramatiq``: same as the ``anarchon-dramatiq`` command."""

import sys

from .cli import main

sys.exit(main())
