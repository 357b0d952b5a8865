"""Signed RPC messages: who may ask a daemon or a reporter to do something over the bus.

Owns the envelope every computed RPC message carries in its request context (the key
:data:`ENVELOPE`, the only one a computed sender writes), how a sender fills it
(:class:`Signer`) and how a receiver judges it (:class:`Verifier`). No I/O, no oslo.messaging:
:mod:`computed.runtime.rpc` puts the envelope on every cast and call and checks it before
dispatching anything.

The envelope: ``sender`` (the sending process's ``[DEFAULT] host``), ``topic`` and ``server``
(where the message was sent: a cast to one daemon cannot be replayed to another), ``ts`` (the
sender's wall clock, seconds), ``nonce`` (random, 128 bits) and ``mac``: HMAC-SHA256, under the
first of ``[messaging] signing_keys``, of the canonical JSON of all of these and of the method
and its arguments (:func:`canonical`). ``mac`` is null when the sender has no key.

What a receiver accepts (:meth:`Verifier.check`; anything else raises :class:`Refused` with the
reason a metric counts it under):

* **With keys configured**: only an envelope whose ``mac`` one of the keys computes (the first
  key signs, all of them verify: rotation adds the new key everywhere, then makes it the first,
  then drops the old one, docs/operations.md), whose ``ts`` is within ``max_age`` seconds of
  the receiver's clock (either way), whose nonce this receiver has not accepted within that
  window (each nonce is remembered ``2 * max_age`` seconds; only messages whose MAC verified are
  remembered, so only a key holder can fill the memory, and it is bounded: the oldest go
  first), and that was addressed to this receiver's topic (and server, when aimed at one).
  Reasons: ``unsigned``, ``forged`` (no key gives that MAC: a wrong key, or a changed message),
  ``expired``, ``replayed``, ``misdirected``, ``malformed`` (an envelope of the wrong shape, or
  a context with other keys).
* **With keys and** ``accept_unsigned`` (``[messaging] accept_unsigned``, while signing is
  turned on or off across a fleet): as with keys, except that a message without a MAC (an
  empty context, or an envelope whose ``mac`` is null) is accepted as it would be without
  keys; :meth:`Verifier.check` says so (:attr:`Accepted.signed` false) so that the caller
  counts it. A MAC that no key computes is still ``forged``.
* **Without keys**: an empty context (a sender from before signing) or a well-formed envelope,
  signed or not (a receiver not yet given the key while its senders have it, during a
  rollout). A context with any other key (``{"user": "nobody"}``) is ``malformed``: computed
  never sends one, so it is someone else's message. This only checks a shape: without keys,
  anyone who can publish on the bus can still send what a computed sender sends
  (docs/security.md).

Keys are secrets: this module never logs nor repeats them, nor a MAC; a refusal names the
method, the claimed sender and the reason only. Thread-safe: a verifier's nonce memory is
behind a lock (oslo.messaging dispatches from a pool of threads).
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: The request context key of computed's envelope: a computed sender writes no other.
ENVELOPE = "computed_auth"
#: Context keys oslo.messaging adds (the rabbit driver puts a call's timeout there, its
#: OpenTelemetry tracing the W3C propagation headers when [oslo_messaging_tracing] is on);
#: allowed beside the envelope, and covered by no MAC: nothing computed does depends on them.
DRIVER_KEYS = frozenset({"client_timeout", "traceparent", "tracestate", "baggage"})
#: Reasons a message is refused, as metrics label them.
REASONS = ("unsigned", "forged", "expired", "replayed", "misdirected", "malformed",
           "unknown_method")
#: The shortest key accepted: 32 characters (e.g. ``openssl rand -hex 32`` gives 64).
MIN_KEY_LENGTH = 32
#: Most nonces a verifier remembers; past it the oldest are forgotten first.
MAX_NONCES = 200_000

_FIELDS = frozenset({"v", "sender", "topic", "server", "ts", "nonce", "mac"})
_HEX = re.compile(r"[0-9a-f]+")
_NAME = re.compile(r"[^\x00-\x1f\x7f-\x9f]{1,255}")


class Accepted(str):
    """The sender an accepted message claims (a ``str``; empty for an empty context), and
    whether it was signed: :attr:`signed` is false only for a message accepted without a MAC
    by a verifier that has keys (``accept_unsigned``)."""

    signed: bool

    def __new__(cls, sender: str | None, signed: bool = True) -> Accepted:
        accepted = super().__new__(cls, sender or "")
        accepted.signed = signed
        return accepted


class Refused(Exception):
    """A message the receiver will not dispatch; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def canonical(method: str, args: Any, envelope: Mapping[str, Any]) -> bytes:
    """The bytes a MAC covers: method, arguments and every envelope field but ``mac`` (pure).

    The arguments are compared as JSON, which is how they cross the bus: tuples arrive as
    lists, and sorted keys make both sides write the same text."""
    signed = {key: envelope.get(key) for key in sorted(_FIELDS - {"mac"})}
    return json.dumps({"method": method, "args": args, "envelope": signed}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def _mac(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def encode_keys(keys: Sequence[str]) -> list[bytes]:
    """The configured keys as bytes, in order (the first signs)."""
    return [key.encode() for key in keys]


class Signer:
    """Fills the envelope of the messages one process sends (``sender``: its host name)."""

    def __init__(self, keys: Sequence[bytes], sender: str,
                 clock: Callable[[], float] = time.time):
        self._key = keys[0] if keys else None
        self.sender = sender
        self._clock = clock

    @property
    def signs(self) -> bool:
        return self._key is not None

    def context(self, method: str, args: Mapping[str, Any], topic: str,
                server: str | None) -> dict[str, Any]:
        """The request context for ``method(**args)`` sent to ``topic`` (``server``)."""
        envelope: dict[str, Any] = {"v": 1, "sender": self.sender, "topic": topic,
                                    "server": server, "ts": round(self._clock(), 3),
                                    "nonce": secrets.token_hex(16), "mac": None}
        if self._key is not None:
            envelope["mac"] = _mac(self._key, canonical(method, dict(args), envelope))
        return {ENVELOPE: envelope}


class Verifier:
    """Judges the envelope of each message one server receives (see the module docstring).

    ``keys``: the accepted keys (none: shape only); ``max_age``: seconds a signed message stays
    valid on either side of this clock; ``clock`` the wall clock, ``monotonic`` the clock that
    ages remembered nonces."""

    def __init__(self, keys: Sequence[bytes], max_age: float,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 max_nonces: int = MAX_NONCES, accept_unsigned: bool = False):
        self._keys = list(keys)
        self.accept_unsigned = accept_unsigned
        self._max_age = max_age
        self._clock = clock
        self._monotonic = monotonic
        self._max_nonces = max_nonces
        self._lock = threading.Lock()
        self._nonces: collections.OrderedDict[str, float] = collections.OrderedDict()

    @property
    def requires_signatures(self) -> bool:
        return bool(self._keys) and not self.accept_unsigned

    def check(self, ctxt: Any, method: str, args: Any, topic: str,
              server: str | None) -> Accepted:
        """The sender an acceptable message claims (empty for an empty context), as
        :class:`Accepted`; raises :class:`Refused` otherwise. ``topic``/``server``: where this
        receiver listens."""
        if ctxt is None:
            ctxt = {}
        if not isinstance(ctxt, Mapping):
            raise Refused("malformed", f"its context is a {type(ctxt).__name__}")
        strangers = sorted(str(key) for key in ctxt if key != ENVELOPE and key not in DRIVER_KEYS)
        if strangers:
            raise Refused("malformed", f"its context has the key {brief(strangers[0])}, which "
                                       f"no computed sender writes")
        envelope = ctxt.get(ENVELOPE)
        if envelope is None:
            if self._keys and not self.accept_unsigned:
                raise Refused("unsigned", "it is not signed, and [messaging] signing_keys is "
                                          "set here")
            return Accepted(None, signed=not self._keys)
        _check_shape(envelope)
        sender = envelope["sender"]
        if not self._keys:
            return Accepted(sender)
        if envelope["mac"] is None:
            if self.accept_unsigned:
                return Accepted(sender, signed=False)
            raise Refused("unsigned", f"sender {sender!r} did not sign it, and [messaging] "
                                      f"signing_keys is set here")
        try:
            payload = canonical(method, args, envelope)
        except (TypeError, ValueError):  # NaN or Infinity: JSON no computed sender writes
            raise Refused("malformed", "its arguments are not plain JSON") from None
        # Every key is tried, in full: which one matched (or how far) is not told by timing.
        matches = [hmac.compare_digest(_mac(key, payload), envelope["mac"])
                   for key in self._keys]
        if not any(matches):
            raise Refused("forged", f"its signature (claiming sender {sender!r}) matches none "
                                    f"of [messaging] signing_keys")
        skew = self._clock() - envelope["ts"]
        if abs(skew) > self._max_age:
            raise Refused("expired", f"signed by {sender!r} {skew:+.0f} s from this clock, "
                                     f"beyond [messaging] signature_max_age "
                                     f"({self._max_age:g} s)")
        if envelope["topic"] != topic or envelope["server"] not in (None, server):
            raise Refused("misdirected", f"signed by {sender!r} for "
                                         f"{envelope['topic']}.{envelope['server']}, "
                                         f"received on {topic}.{server}")
        self._remember(envelope["nonce"], sender)
        return Accepted(sender)

    def _remember(self, nonce: str, sender: str) -> None:
        now = self._monotonic()
        with self._lock:
            nonces = self._nonces
            # Inserted in arrival order with one lifetime each: the expired ones are in front.
            while nonces and (next(iter(nonces.values())) <= now
                              or len(nonces) >= self._max_nonces):
                nonces.popitem(last=False)
            if nonce in nonces:
                raise Refused("replayed", f"signed by {sender!r} and already received "
                                          f"(nonce seen within {2 * self._max_age:g} s)")
            nonces[nonce] = now + 2 * self._max_age


def _check_shape(envelope: Any) -> None:
    if not isinstance(envelope, Mapping) or set(envelope) != _FIELDS:
        raise Refused("malformed", "its envelope is not computed's")
    if envelope["v"] != 1:
        raise Refused("malformed", f"envelope version {brief(envelope['v'])}")
    for field in ("sender", "topic"):
        value = envelope[field]
        if not isinstance(value, str) or not _NAME.fullmatch(value):
            raise Refused("malformed", f"envelope field {field!r}: {brief(value)}")
    server = envelope["server"]
    if server is not None and not (isinstance(server, str) and _NAME.fullmatch(server)):
        raise Refused("malformed", f"envelope field 'server': {brief(server)}")
    ts = envelope["ts"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        raise Refused("malformed", f"envelope field 'ts': {brief(ts)}")
    nonce = envelope["nonce"]
    if not (isinstance(nonce, str) and 16 <= len(nonce) <= 64 and _HEX.fullmatch(nonce)):
        raise Refused("malformed", f"envelope field 'nonce': {brief(nonce)}")
    mac = envelope["mac"]
    if mac is not None and not (isinstance(mac, str) and len(mac) == 64
                                and _HEX.fullmatch(mac)):
        raise Refused("malformed", "envelope field 'mac' is not an HMAC-SHA256")


def brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 64 else f"{text[:64]}..."
