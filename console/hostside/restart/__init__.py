"""The host-side half of restart: stdlib-only modules that run on the serving host.

`main` is the bundle's `restart` entry point (see `console.hostside`); the laptop half is
`console.restart`.
"""
