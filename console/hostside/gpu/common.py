"""What the GPU sources share: the error that rules a source out, and the source of last resort."""

MIB = 1024 * 1024


class GpuUnavailable(Exception):
    """This GPU source cannot be used; the message says why."""


class NoGpuSource:
    """No readings: no source could be used (or none was wanted); `reason` says why."""

    source = "none"
    detail = ""

    def __init__(self, reason):
        self.reason = reason

    def read(self):
        return [], [], None

    def children(self):
        return []

    def close(self):
        pass
