"""vLLM's log timestamps (`MM-DD HH:MM:SS`, host local time, no year) as epoch seconds.

Replaying a run's log must time its start-up phases by the log, not by when the bytes arrived
here; the agent tells the host's UTC offset and clock, so "loading weights 2m10s" is measured on
the host's clock whatever this machine's clock or time zone says.
"""

from __future__ import annotations

import calendar
import time


class LogClock:
    """Converts stamps and estimates the host's clock (`now()`) from the agent's samples."""

    def __init__(self, tz_offset_s: float | None = None, skew_s: float = 0.0) -> None:
        self.tz_offset_s = tz_offset_s if tz_offset_s is not None else -time.timezone
        self.skew_s = skew_s
        self._cache: dict[str, float | None] = {}

    def observe_host_time(self, host_ts: float, local_ts: float) -> None:
        """A host timestamp taken at `local_ts` (this machine's epoch): learn the skew."""
        self.skew_s = host_ts - local_ts

    def now(self) -> float:
        """The host's clock now, as well as it is known."""
        return time.time() + self.skew_s

    def epoch(self, stamp: str | None, now: float | None = None) -> float | None:
        """Epoch seconds of a `MM-DD HH:MM:SS` stamp (the most recent such instant not more
        than a day after `now`); None for a missing or malformed stamp."""
        if not stamp:
            return None
        if stamp in self._cache:
            value = self._cache[stamp]
        else:
            value = self._parse(stamp, now if now is not None else self.now())
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[stamp] = value
        return value

    def _parse(self, stamp: str, now: float) -> float | None:
        try:
            date, clock = stamp.split(" ")
            month, day = (int(x) for x in date.split("-"))
            hour, minute, second = (int(x) for x in clock.split(":"))
            year = time.gmtime(now + self.tz_offset_s).tm_year
            for y in (year, year - 1):
                local = calendar.timegm((y, month, day, hour, minute, second, 0, 0, 0))
                value = local - self.tz_offset_s
                if value <= now + 86400:
                    return float(value)
        except (ValueError, OverflowError):
            return None
        return None
