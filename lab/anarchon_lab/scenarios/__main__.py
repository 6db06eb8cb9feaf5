"""``python -m anarchon_lab.scenarios scenarios --backend sqlite``."""

import sys

from .cli import main

sys.exit(main())
