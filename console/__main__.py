"""`python -m console` is `vllm-console`."""

import sys

from vllm_console.console.cli.parser import main

sys.exit(main())
