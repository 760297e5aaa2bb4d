"""The terminal UI: the Textual apps (one host or many, the Prometheus fleet), their screens,
what the UI remembers between runs, and the handling of a terminal that goes away. The apps and
screens import textual; `hangup` and `ui_state` are headless and listed in the core."""
