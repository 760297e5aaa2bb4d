"""Splitting raw log output into lines.

vLLM joins multi-line messages with `\\r\\n` and tqdm redraws its bar with a bare `\\r`, so all
three endings (`\\r\\n`, `\\n`, `\\r`) end a line here. Only those three: `str.splitlines` would
also split on form feeds, `\\x1c`..`\\x1e`, NEL and the Unicode separators that can appear
inside a message.
"""

from __future__ import annotations

import codecs
import re

_LINE_END = re.compile(r"\r\n|\r|\n")


def decode(chunk: bytes | str) -> str:
    """Decode bytes as UTF-8, replacing what is not; a `str` is returned unchanged."""
    if isinstance(chunk, str):
        return chunk
    return bytes(chunk).decode("utf-8", errors="replace")


def split_lines(chunk: bytes | str) -> list[str]:
    """Split a complete chunk of output into lines, without their endings.

    A final line without an ending is kept; a trailing ending does not add an empty line.
    """
    text = decode(chunk)
    if not text:
        return []
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


class LineAssembler:
    """Turns a stream of byte or text chunks into whole lines.

    Holds back the unfinished last line, a `\\r` that may be the first half of `\\r\\n`, and an
    incomplete UTF-8 sequence until the next chunk completes them.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def feed(self, chunk: bytes | str) -> list[str]:
        """Add a chunk; return the lines it completed."""
        text = chunk if isinstance(chunk, str) else self._decoder.decode(bytes(chunk))
        text = self._pending + text
        if not text:
            return []
        # A `\r` at the very end may be followed by `\n` in the next chunk.
        cut = len(text) - 1 if text.endswith("\r") else len(text)
        lines = _LINE_END.split(text[:cut])
        self._pending = lines.pop() + text[cut:]
        return lines

    def flush(self) -> list[str]:
        """End of stream: return whatever is still held as lines."""
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        return split_lines(tail)
