"""Benchmarks of the console: speed and cost, measured side by side with its peers.

`python -m benchmarks` runs them all and prints the table (see `benchmarks.__main__`). Each
`bench_*` module also runs on its own. Benchmarks are not tests: nothing in `tests/` uses them.
"""
