"""Everything the console runs on the GPU host, in one package.

Stdlib only and no import from the rest of the console (import-linter enforces it): the
package travels to the host as files and runs there under the host's own Python.
"""
