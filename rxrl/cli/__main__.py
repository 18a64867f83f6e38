"""``python -m rxrl.cli``: the ``rxrl`` command."""

import sys

from rxrl.cli import main

if __name__ == "__main__":
    sys.exit(main())
