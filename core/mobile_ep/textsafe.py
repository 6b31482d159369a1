"""Text for a terminal: names from a model (nodes, values, files) may hold control sequences.

A name such as ``"\\x1b]0;pwned\\x07"`` would set the terminal's title, ``"\\r"`` would overwrite the line
before it, U+202E would print the rest of the line backwards.  :func:`escape` shows every such character
as a Python-style escape instead; the command line passes all its text output and log lines through it
(the HTML report escapes on its own, JSON through ``json.dumps``).
"""

from __future__ import annotations

import logging
import re

__all__ = ["escape", "EscapingFormatter"]

# C0 controls but tab and newline, DEL, C1 controls; and the invisible characters that reorder or hide text
# (bidirectional embeddings, overrides and isolates, marks, zero-width characters, BOM, line/paragraph separators).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape(text: str, *, one_line: bool = False) -> str:
    """*text* with terminal control characters shown as escapes (``\\x1b``, ``\\r``, ``\\u202e``); newlines
    and tabs are kept unless *one_line*."""
    pattern = _UNSAFE_LINE if one_line else _UNSAFE
    return pattern.sub(_escaped, text) if pattern.search(text) else text


class EscapingFormatter(logging.Formatter):
    """A log formatter whose lines are :func:`escape`-d, each record on one line."""

    def format(self, record: logging.LogRecord) -> str:
        return escape(super().format(record), one_line=record.exc_info is None)
