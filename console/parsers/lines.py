"""Splitting raw log output into lines.

vLLM joins multi-line messages with `\\r\\n` and tqdm redraws its bar with a bare `\\r`, so all
three endings (`\\r\\n`, `\\n`, `\\r`) end a line here. Only those three: `str.splitlines` would
also split on form feeds, `\\x1c`..`\\x1e`, NEL and the Unicode separators that can appear
inside a message.
"""

from __future__ import annotations

import codecs

from vllm_console.console.parsers.prefix import strip_ansi, strip_ansi_block


def decode(chunk: bytes | str) -> str:
    """Decode bytes as UTF-8, replacing what is not; a `str` is returned unchanged."""
    if isinstance(chunk, str):
        return chunk
    return bytes(chunk).decode("utf-8", errors="replace")


def _as_lf(text: str) -> str:
    """`text` with every line end (`\\r\\n`, `\\r`, `\\n`) as `\\n`. Each `\\r\\n` (they cannot
    overlap) becomes one `\\n` first, then every `\\r` left stands alone: the separators of a
    regex split on `\\r\\n|\\r|\\n`, found by two replaces in C."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def split_lines(chunk: bytes | str) -> list[str]:
    """Split a complete chunk of output into lines, without their endings.

    A final line without an ending is kept; a trailing ending does not add an empty line.
    """
    text = decode(chunk)
    if not text:
        return []
    lines = _as_lf(text).split("\n")
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
        block = self._block(chunk)
        return [] if block is None else block.split("\n")

    def feed_stripped(self, chunk: bytes | str) -> list[str]:
        """`feed`, each line through `strip_ansi`: for a chunk whose only control characters
        are line ends and colour codes, in a few passes over the whole chunk."""
        block = self._block(chunk)
        if block is None:
            return []
        stripped = strip_ansi_block(block)
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

    def _block(self, chunk: bytes | str) -> str | None:
        """The whole lines the chunk completes (the held part first) as one block, line ends
        made `\\n`, the last one left out; None when there is none. Holds back the rest."""
        text = chunk if isinstance(chunk, str) else self._decoder.decode(bytes(chunk))
        text = self._pending + text
        held = ""
        if text.endswith("\r"):  # may be followed by `\n` in the next chunk
            text, held = text[:-1], "\r"
        text = _as_lf(text)
        end = text.rfind("\n")
        self._pending = text[end + 1:] + held
        return text[:end] if end >= 0 else None
