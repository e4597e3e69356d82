"""`python -m api.cli`: the same as the `mlog` console script."""

import sys

from api.cli.main import main

sys.exit(main())
