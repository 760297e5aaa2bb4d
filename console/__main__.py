"""`python -m console` is `vllm-console`."""

import sys

from console.cli import main

sys.exit(main())
