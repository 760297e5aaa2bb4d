"""A host's session: `HostSession` (`host_session`: the link, the telemetry and the actions,
headless) and `PendingSession` (`pending`: the host shown at once, its session made after the
first frame). Importing this package imports neither."""
