"""The one exception type for bad configuration.

Guarantees: a ``ConfigError`` always renders as a single line that names the
option it is about (``[group] option: reason``), or the file when the problem
is a whole file, so entry points can print it as-is.
"""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration problem, carrying the option (or file) it is about."""

    def __init__(self, group: str | None, option: str | None, reason: str):
        self.group = group
        self.option = option
        self.reason = reason
        super().__init__(str(self))

    def __str__(self) -> str:
        # Multi-line reasons (e.g. from parsers) would break the one-line
        # contract, so they are folded.
        reason = ' '.join(self.reason.split())
        if self.option is None:
            return reason
        return f'[{self.group or "DEFAULT"}] {self.option}: {reason}'
