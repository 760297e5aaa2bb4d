"""How many examples a property test draws: all it asks for in the whole suite (`make test`,
CI), at most LOOP_EXAMPLES in the developer's loop (`make check` loads the `loop` profile).

Hypothesis lets a test's own `max_examples` win over the loaded profile, so the tests that ask
for more than the default say `max_examples=examples(N)`.
"""

from __future__ import annotations

import os

LOOP_EXAMPLES = 40
LOOP = os.environ.get("HYPOTHESIS_PROFILE") == "loop"


def examples(wanted: int) -> int:
    return min(wanted, LOOP_EXAMPLES) if LOOP else wanted
