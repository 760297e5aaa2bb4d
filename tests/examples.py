"""How many examples a property test draws: all it asks for in the whole suite (`make test`,
CI), at most LOOP_EXAMPLES in the developer's loop (`make check` loads the `loop` profile).
And how long the hostile one-line inputs are: 1 MiB in the suite, a quarter of it in the loop,
with a quarter of the CPU allowed (a parser that rescans shows as seconds either way).

Hypothesis lets a test's own `max_examples` win over the loaded profile, so the tests that ask
for more than the default say `max_examples=examples(N)`.
"""

from __future__ import annotations

import os

LOOP_EXAMPLES = 40
LOOP = os.environ.get("HYPOTHESIS_PROFILE") == "loop"
BIG_LINE = 1 << (18 if LOOP else 20)


def examples(wanted: int) -> int:
    return min(wanted, LOOP_EXAMPLES) if LOOP else wanted
