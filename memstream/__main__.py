"""``python -m memstream``: the same command line as the ``memstream`` script."""

import sys

from memstream.cli.main import main

sys.exit(main())
