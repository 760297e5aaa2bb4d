"""The four links: each turns the facts its probes gathered into a `LinkResult`.

Evaluation is pure (no host, no I/O): `evaluate(...)` functions take the facts and the
profile's spec, so every verdict can be tested on crafted facts.
"""
