"""`python -m tools.mutate`: the mutation runner's command line (tools/mutate/runner.py)."""

import sys

from tools.mutate.runner import main

sys.exit(main())
