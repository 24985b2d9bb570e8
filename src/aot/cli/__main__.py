"""``python -m aot.cli ...`` (and ``torchrun ... -m aot.cli ...``): the `aot` command."""

import sys

from aot.cli import main

sys.exit(main())
