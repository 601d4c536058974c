"""`python -m rebalancer.cli`, as the tests and the harness start the controller."""

import sys

from rebalancer.cli import main

sys.exit(main())
