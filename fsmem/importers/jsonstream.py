"""The items of a JSON array read one at a time from a file, so that a 1 GB export needs no 1 GB of memory.

`json.JSONDecoder.raw_decode` parses each item from a buffer that holds
little more than that item: when an item runs past the buffer, more of the
file is read (twice as much each time, so a long item costs linear time) and
the item is parsed again. A malformed file is named with the line and column
of the fault, as `json.load` would name it; an item larger than `ITEM_LIMIT`
is refused rather than held. Measured against ijson (yajl2_c) in the commit
that added it: about twice as fast, and exact positions in its errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

CHUNK = 1 << 20  # characters read at a time
ITEM_LIMIT = 256 << 20  # characters: one conversation larger than this is refused, never held
_NEAR_END = 16  # an error this close to the buffer's end may be an item cut by the buffer, not a fault
_SPACE = " \t\n\r"


class JSONFault(ValueError):
    """The file is not a JSON array fsmem can read: `line` and `column` (1-based) say where."""

    def __init__(self, message: str, line: int, column: int):
        super().__init__(f"line {line} column {column}: {message}")
        self.message, self.line, self.column = message, line, column


@dataclass(frozen=True)
class Item:
    """One item of the array, with the line it starts on (1-based) and its index in the array."""

    index: int
    line: int
    value: Any


class ArrayReader:
    """Iterate the items of the JSON array in the text file `stream`."""

    def __init__(self, stream: IO[str], *, chunk: int = CHUNK, item_limit: int = ITEM_LIMIT):
        self.stream = stream
        self.chunk = chunk
        self.item_limit = item_limit
        self.decoder = json.JSONDecoder()
        self.buffer = ""
        self.pos = 0
        self.line = 1  # the line of buffer[0]
        self.column = 1  # the column of buffer[0]
        self.mark, self.mark_line, self.mark_column = 0, 1, 1  # a position already counted, and its line and column
        self.eof = False

    def _more(self, at_least: int) -> bool:
        """Read at least `at_least` more characters (fewer at the end); False when the file is over.

        What is parsed is dropped first, so positions in the buffer move: a caller parses again.
        """
        if self.eof:
            return False
        # drop what is parsed, keeping the line and column of the new start
        self.line, self.column = self.where(self.pos)
        self.buffer = self.buffer[self.pos :]
        self.pos = self.mark = 0
        self.mark_line, self.mark_column = self.line, self.column
        data = self.stream.read(max(at_least, self.chunk))
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    def where(self, pos: int) -> tuple[int, int]:
        """The line and column of buffer position `pos`."""
        if pos < self.mark:  # counted from the buffer's start again (only an error looks back)
            self.mark, self.mark_line, self.mark_column = 0, self.line, self.column
        newlines = self.buffer.count("\n", self.mark, pos)
        if newlines:
            line, column = self.mark_line + newlines, pos - self.buffer.rfind("\n", self.mark, pos)
        else:
            line, column = self.mark_line, self.mark_column + pos - self.mark
        self.mark, self.mark_line, self.mark_column = pos, line, column
        return line, column

    def fault(self, message: str, pos: int) -> JSONFault:
        return JSONFault(message, *self.where(pos))

    def _skip_space(self) -> str:
        """The next character that is not white space ("" at the end of the file), not consumed."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self._more(self.chunk):
                return ""

    def __iter__(self) -> Iterator[Item]:
        first = self._skip_space()
        if first == "\ufeff":
            self.pos += 1
            first = self._skip_space()
        if first != "[":
            raise self.fault("expected a JSON array ('[')" if first else "the file is empty", self.pos)
        self.pos += 1
        index = 0
        while True:
            ch = self._skip_space()
            if ch == "]" and index == 0:
                self.pos += 1
                break
            if index:
                if ch == "]":
                    self.pos += 1
                    break
                if ch != ",":
                    raise self.fault("expected ',' or ']' after an item" if ch else "the array is not closed", self.pos)
                self.pos += 1
                ch = self._skip_space()
            if not ch:
                raise self.fault("the array is not closed", self.pos)
            line = self.where(self.pos)[0]
            yield Item(index, line, self._value())
            index += 1
        if self._skip_space():
            raise self.fault("more data after the array", self.pos)

    def _value(self) -> Any:
        """The item that starts at `pos`, reading more of the file while it runs past the buffer."""
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buffer) - _NEAR_END or exc.msg.startswith("Unterminated string")
                if not cut or self.eof:
                    raise self.fault(exc.msg, exc.pos) from None
                if len(self.buffer) - self.pos > self.item_limit:
                    raise self.fault(f"an item larger than {self.item_limit >> 20} MiB", self.pos) from None
                self._more(len(self.buffer) - self.pos)  # twice the item's part so far; parsed again
                continue
            except RecursionError:
                raise self.fault("nested too deeply", self.pos) from None
            if end > len(self.buffer) - _NEAR_END and not self.eof:
                # a number may go on in the next chunk ("12" of "123", "-2." of "-2.5e3"): make sure it ends here
                self._more(_NEAR_END)  # positions move: parsed again, at the end of the file if it is
                continue
            self.pos = end
            return value
