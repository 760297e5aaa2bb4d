"""`python -m tests.real_vllm build|demo`: build (or find) the real-vLLM fixture, with progress;
or open the console on a real `vllm serve` (`make demo-real`, see demo.py)."""

from __future__ import annotations

import sys

from tests.real_vllm.fixture import FixtureBuildFailed, FixtureUnavailable, build


def main(argv: list[str]) -> int:
    if argv[:1] == ["demo"]:
        from tests.real_vllm.demo import main as demo

        return demo()
    if argv[:1] != ["build"]:
        print("usage: python -m tests.real_vllm build|demo", file=sys.stderr)
        return 2
    try:
        fixture = build(progress=lambda line: print(f"real vLLM fixture: {line}", flush=True))
    except FixtureUnavailable as exc:
        print(f"real vLLM fixture: not on this platform: {exc}")
        return 0
    except FixtureBuildFailed as exc:
        print(f"real vLLM fixture: build failed: {exc}", file=sys.stderr)
        return 1
    print(f"real vLLM fixture: ready at {fixture.root} ({fixture.size_mb()} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
