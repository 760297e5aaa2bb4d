"""The check chain's probes: the entry points `probe-code`, `probe-configs`, `probe-fields`,
`probe-log` of the host-side bundle.

Each runs on the host — with the serving interpreter when it must see the serving vLLM
(`code_probe`, `fields_probe`), else with `python3` (`log_probe`, `configs_probe`) — and answers
as `console.hostside.wire` says: one JSON object on stdin (the parameters), one JSON object
after the marker (the facts); expected problems (a missing file, an import error) are facts in
that object, and the exit status is 0. A crash exits non-zero with its traceback on stderr.
They never write anything on the host.

They are importable too, so unit tests call their functions in-process.
"""
