"""`python -m console` is `vllm-console`."""

import sys

from console.cli.parser import main

sys.exit(main())
