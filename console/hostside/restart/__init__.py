"""The host-side half of restart: stdlib-only modules that run on the serving host.

`console.restart.bundle` packs them into one zipapp, installed once per content hash in the
private per-user directory; `main` is its entry point. Python 3.9+, nothing from the console.
"""
