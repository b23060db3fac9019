"""`python -m control.cli`: the `anneal` command (how `anneal serve --background` starts itself)."""

import sys

from control.cli import main

sys.exit(main())
