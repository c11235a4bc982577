"""`python -m tcl.cli`: the same as the `tcl` command."""

import sys

from . import main

sys.exit(main())
