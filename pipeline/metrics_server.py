"""The ``/metrics`` endpoint of ``capture --follow`` and ``run --continuous``.

Prometheus scrapes the text format from ``http://<metrics.address>/metrics`` (prometheus-client's
own WSGI server on a daemon thread: a scrape never blocks a batch, and the process never waits
for the server at exit).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from pipeline.errors import ConfigError

__all__ = ["MetricsServer", "parse_address", "serve"]

logger = logging.getLogger(__name__)

_ADDRESS = re.compile(
    r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>\d{1,5})$"
)


def parse_address(text: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` for an IPv6 literal).

    Raises:
        ValueError: Not ``host:port``, or the port is outside 1-65535.
    """
    match = _ADDRESS.match(text.strip())
    if match is None:
        raise ValueError(
            f"'{text}' is not host:port (e.g. 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)"
        )
    port = int(match["port"])
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} of '{text}' is outside 1-65535")
    return match["v6"] or match["host"], port


@dataclass
class MetricsServer:
    """A running endpoint; :meth:`close` stops it.

    Attributes:
        host: The address it listens on.
        port: Its port.
    """

    host: str
    port: int
    _httpd: Any

    @property
    def url(self) -> str:
        """The scrape URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()


def serve(address: str, registry: Any) -> MetricsServer:
    """Serve ``registry`` at ``address`` on a daemon thread.

    Raises:
        ConfigError: The address is not valid or its port cannot be bound (in use, a host
            that is not this machine's).
    """
    from prometheus_client import start_http_server

    try:
        host, port = parse_address(address)
    except ValueError as exc:
        raise ConfigError(str(exc), key_path="metrics.address") from exc
    try:
        httpd, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on {address}: {exc.strerror or exc}",
            key_path="metrics.address",
        ) from exc
    server = MetricsServer(host, port, httpd)
    logger.info("metrics served at %s", server.url)
    return server
