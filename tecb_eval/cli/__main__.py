"""``python -m tecb_eval.cli``: the same as the ``tecb-eval`` command."""

import sys

from tecb_eval.cli import main

sys.exit(main())
