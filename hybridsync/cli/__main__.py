"""`python -m hybridsync.cli ...`: the same as the `hybridsync` command."""

import sys

from hybridsync.cli import main

sys.exit(main())
