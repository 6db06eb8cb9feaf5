"""``python -m anarchon.scenarios scenarios --backend sqlite``."""

import sys

from .cli import main

sys.exit(main())
