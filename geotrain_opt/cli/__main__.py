"""``python -m geotrain_opt.cli``: the same as the ``geotrain-opt`` command."""
import sys

from geotrain_opt.cli import main

sys.exit(main())
