"""Secrets in URLs: what they are, how they look once masked, and keeping them out of the logs.

Owns the rule that a credential carried in a configured URL (``[coordination] backend_url`` as
``zookeeper://user:password@host:2181``) never reaches a log line or a terminal. The options
themselves are ``secret`` in oslo.config (its own dumps print ``****``); the URL computed prints
is :func:`masked_url`; and :class:`SecretFilter` on every handler of the root logger rewrites a
record that would carry a secret anyway. kazoo logs the digest credential it authenticates with
(``Auth(... auth='user:password')``) at DEBUG: with ``debug = True`` it reached the log verbatim.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib import parse

MASK = "***"


def url_secrets(url: str) -> list[str]:
    """The secrets a URL carries: its password, and ``user:password`` as credentials are
    often logged whole. Empty when it has none."""
    try:
        parts = parse.urlsplit(url)
        password = parts.password
    except ValueError:  # a URL parse cannot make sense of: nothing to find in it
        return []
    if not password:
        return []
    return [f"{parts.username or ''}:{password}", password]


def masked_url(url: str) -> str:
    """``url`` with its password replaced by :data:`MASK` (user and hosts kept)."""
    masked = url
    for secret in url_secrets(url):
        user, _, password = secret.partition(":")
        masked = masked.replace(f"{user}:{password}@", f"{user}:{MASK}@")
    return masked


class SecretFilter(logging.Filter):
    """Rewrites every record that would show one of ``secrets``; passes everything."""

    def __init__(self, secrets: Iterable[str]):
        super().__init__()
        # Longest first: "user:password" is masked whole before "password" alone.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets:
            return True
        message = record.getMessage()
        text = message
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        if text != message:
            record.msg, record.args = text, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            for secret in self._secrets:
                record.exc_text = record.exc_text.replace(secret, MASK)
        return True


def keep_out_of_logs(secrets: Iterable[str]) -> None:
    """Install a :class:`SecretFilter` on every handler of the root logger (after logging is
    set up: oslo.log replaces the handlers)."""
    secret_filter = SecretFilter(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(secret_filter)
