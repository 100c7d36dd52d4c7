"""``python -m tinker_lite.cli``: the ``tinker-lite`` command."""

import sys

from tinker_lite.cli._main import main

sys.exit(main())
