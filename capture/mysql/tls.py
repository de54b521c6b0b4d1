"""PyMySQL connections that share one "TLS preferred" context per process.

Without TLS options PyMySQL 1.2 tries TLS on every connection ("preferred": used when the server
offers it, without certificate verification, since no CA is given) and builds that context anew
for each connection with ``ssl.create_default_context()``, which loads the system CA bundle:
tens of milliseconds of CPU per connection, 6 % of a 50,000-event stream phase, whose binlog
reader opens two connections (py-spy, ``benchmarks/mysql_capture.py``). The context is the same
every time, and an ``SSLContext`` is made to be shared by many connections, so
:class:`SharedTlsConnection` builds it once per process. Explicit TLS options (a CA, a client
certificate, verification) still get a context of their own, built by PyMySQL as before.
"""

from __future__ import annotations

import ssl
import threading
from typing import Any

import pymysql

__all__ = ["SharedTlsConnection"]

_lock = threading.Lock()
_preferred: list[ssl.SSLContext] = []
"""The process's "TLS preferred" context, once built."""


class SharedTlsConnection(pymysql.connections.Connection):
    """A PyMySQL connection whose "TLS preferred" context is the process's shared one."""

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        if not (isinstance(sslp, dict) and not sslp):  # explicit options: PyMySQL's own
            context: ssl.SSLContext = super()._create_ssl_ctx(sslp)
            return context
        with _lock:
            if not _preferred:
                _preferred.append(super()._create_ssl_ctx(sslp))
            return _preferred[0]
