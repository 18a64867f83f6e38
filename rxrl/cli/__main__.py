"""``python -m rxrl.cli``: the ``rxrl`` command."""

import sys

from rxrl.cli import main

sys.exit(main())
