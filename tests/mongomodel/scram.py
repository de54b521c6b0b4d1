"""The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as MongoDB runs it, for the wire peer.

MongoDB authenticates with ``saslStart`` / ``saslContinue`` commands carrying the SCRAM messages
as binary payloads (MongoDB manual, "SCRAM"; the drivers' authentication specification):

1. ``hello`` with ``saslSupportedMechs: "<db>.<user>"`` is answered with the user's mechanisms
   (here ``["SCRAM-SHA-256"]``); a ``speculativeAuthenticate`` in ``hello`` may be ignored, and
   the driver then runs the conversation in full;
2. ``saslStart`` (``mechanism``, ``payload`` = ``n,,n=<user>,r=<client nonce>``) ->
   ``conversationId``, ``done: false``, ``payload`` = ``r=<nonce>,s=<salt>,i=<iterations>``;
3. ``saslContinue`` (``payload`` = ``c=biws,r=<nonce>,p=<proof>``) -> ``done: true`` (the
   driver asks ``skipEmptyExchange``) and ``payload`` = ``v=<server signature>``; a wrong proof
   is error 18 ``AuthenticationFailed`` ("Authentication failed.").

Until a connection has authenticated, commands other than the handshake's are refused with
error 13 ``Unauthorized`` ("command <name> requires authentication").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass, field

__all__ = ["AuthFailed", "Conversation", "ScramUsers"]

ITERATIONS = 15_000  # MongoDB's default scramSHA256IterationCount


class AuthFailed(Exception):
    """The proof (or the user) is wrong."""


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _fields(message: bytes) -> dict[bytes, bytes]:
    return dict(part.split(b"=", 1) for part in message.split(b",") if b"=" in part)


@dataclass
class Conversation:
    """One connection's SCRAM conversation (and, once done, who it authenticated)."""

    user: str | None = None
    authenticated: str | None = None
    first_bare: bytes = b""
    server_first: bytes = b""
    nonce: bytes = b""


@dataclass
class ScramUsers:
    """The users the peer knows: name -> password (stored as SCRAM keys, like a server)."""

    passwords: dict[str, str] = field(default_factory=dict)
    _keys: dict[str, tuple[bytes, bytes, bytes]] = field(default_factory=dict, repr=False)

    def __bool__(self) -> bool:
        return bool(self.passwords)

    def _user_keys(self, user: str) -> tuple[bytes, bytes, bytes]:
        """``(salt, stored key, server key)`` of ``user``."""
        if user not in self._keys:
            salt = os.urandom(16)
            salted = hashlib.pbkdf2_hmac("sha256", self.passwords[user].encode(), salt, ITERATIONS)
            stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
            self._keys[user] = (salt, stored, _hmac(salted, b"Server Key"))
        return self._keys[user]

    def start(self, conversation: Conversation, payload: bytes) -> bytes:
        """``saslStart``: the client-first message -> the server-first message."""
        if not payload.startswith(b"n,"):
            raise AuthFailed("channel binding is not supported")
        first_bare = payload.split(b",", 2)[2]
        parsed = _fields(first_bare)
        user = parsed[b"n"].decode().replace("=2C", ",").replace("=3D", "=")
        if user not in self.passwords:
            raise AuthFailed(f"no user {user}")
        salt, _, _ = self._user_keys(user)
        nonce = parsed[b"r"] + base64.b64encode(os.urandom(18))
        server_first = (
            b"r=" + nonce + b",s=" + base64.b64encode(salt) + b",i=" + str(ITERATIONS).encode()
        )
        conversation.user = user
        conversation.first_bare = first_bare
        conversation.server_first = server_first
        conversation.nonce = nonce
        return server_first

    def finish(self, conversation: Conversation, payload: bytes) -> bytes:
        """``saslContinue``: the client-final message -> the server-final message."""
        if conversation.user is None:
            raise AuthFailed("saslContinue without saslStart")
        without_proof, _, proof_part = payload.rpartition(b",p=")
        if _fields(without_proof).get(b"r") != conversation.nonce:
            raise AuthFailed("nonce mismatch")
        _, stored, server_key = self._user_keys(conversation.user)
        message = conversation.first_bare + b"," + conversation.server_first + b"," + without_proof
        signature = _hmac(stored, message)
        proof = base64.b64decode(proof_part)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), stored):
            raise AuthFailed("wrong proof")
        conversation.authenticated = conversation.user
        return b"v=" + base64.b64encode(_hmac(server_key, message))
