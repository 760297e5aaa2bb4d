"""Splitting raw log output into lines.

vLLM joins multi-line messages with `\\r\\n` and tqdm redraws its bar with a bare `\\r`, so all
three endings (`\\r\\n`, `\\n`, `\\r`) end a line here. Only those three: `str.splitlines` would
also split on form feeds, `\\x1c`..`\\x1e`, NEL and the Unicode separators that can appear
inside a message.
"""

from __future__ import annotations

import codecs
import re

from console.parsers.prefix import strip_ansi, strip_ansi_block

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
        self._sgr: list[str] = []  # colour codes met so far, for `strip_ansi_block`

    def feed(self, chunk: bytes | str) -> list[str]:
        """Add a chunk; return the lines it completed."""
        return self._split(self._pending + self._decode(chunk))

    def feed_stripped(self, chunk: bytes | str) -> list[str]:
        """`feed`, each line through `strip_ansi`: for a chunk whose only control characters
        are `\\n` endings and colour codes, in a few passes over the whole chunk."""
        text = self._pending + self._decode(chunk)
        end = text.rfind("\n")
        if end < 0 or "\r" in text:
            return [strip_ansi(line) for line in self._split(text)]
        self._pending = text[end + 1:]
        block = text[:end]
        stripped = strip_ansi_block(block, self._sgr)
        if stripped is None:
            return [strip_ansi(line) for line in block.split("\n")]
        return stripped.split("\n")

    def flush(self) -> list[str]:
        """End of stream: return whatever is still held as lines."""
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        return split_lines(tail)

    def flush_stripped(self) -> list[str]:
        """`flush`, each line through `strip_ansi`."""
        return [strip_ansi(line) for line in self.flush()]

    def _decode(self, chunk: bytes | str) -> str:
        return chunk if isinstance(chunk, str) else self._decoder.decode(bytes(chunk))

    def _split(self, text: str) -> list[str]:
        """The whole lines of `text` (the held part first); holds back the rest."""
        if "\r" not in text:
            # The usual chunk: `\n` endings only, one split in C (an empty text gives [""]).
            lines = text.split("\n")
            self._pending = lines.pop()
            return lines
        # A `\r` at the very end may be followed by `\n` in the next chunk.
        cut = len(text) - 1 if text.endswith("\r") else len(text)
        lines = _LINE_END.split(text[:cut])
        self._pending = lines.pop() + text[cut:]
        return lines
