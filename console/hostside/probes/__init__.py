"""Host-side probe scripts (stdlib only, Python 3.8+), shipped as package data.

Each is installed once per content hash by `console.remote_scripts.RemoteScripts` and run on the
host — with the serving interpreter when it must see the serving vLLM (`code_probe`,
`fields_probe`), else with `python3` (`log_probe`, `configs_probe`). Protocol: one JSON object
on stdin (the parameters), one JSON object on stdout (the facts); expected problems (a missing
file, an import error) are facts in that object, and the exit status is 0. A crash exits
non-zero with its traceback on stderr. They never write anything on the host.

They are importable too, so unit tests call their functions in-process.
"""
