"""PyMySQL's "TLS preferred" context, built once per process (:mod:`capture.mysql.tls`)."""

from __future__ import annotations

import ssl

from capture.mysql.tls import SharedTlsConnection


def _unconnected(**kwargs: object) -> SharedTlsConnection:
    return SharedTlsConnection(host="127.0.0.1", user="u", defer_connect=True, **kwargs)


def test_connections_without_tls_options_share_pymysqls_preferred_context() -> None:
    first, second = _unconnected(), _unconnected()
    assert first.ssl and not first._ssl_required  # PyMySQL's "preferred": tried, not required
    assert first.ctx is second.ctx
    assert first.ctx.verify_mode == ssl.CERT_NONE and not first.ctx.check_hostname


def test_explicit_tls_options_keep_a_context_of_their_own() -> None:
    shared = _unconnected()
    explicit = _unconnected(ssl={"verify_mode": "optional"})
    assert explicit._ssl_required
    assert explicit.ctx is not shared.ctx
    assert explicit.ctx.verify_mode == ssl.CERT_OPTIONAL
    assert _unconnected(ssl_disabled=True).ssl is False
