"""``python -m service.cli``: the ``featurebudget`` command."""

import sys

from service.cli.parser import main

if __name__ == "__main__":
    sys.exit(main())
