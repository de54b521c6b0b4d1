"""What the silver job hands Spark when a micro-batch fails and the failure has no text."""

from __future__ import annotations

from py4j.protocol import Py4JJavaError, Py4JNetworkError

from silver.job import _for_spark, _interruption


class _GoneGateway:
    """The gateway client of a JVM that has exited: every command fails, as Py4J's does."""

    def send_command(self, command: str) -> str:
        raise Py4JNetworkError(f"Answer from Java side is empty (command {command.split()[0]})")


class _JavaException:
    """The JavaObject a Py4JJavaError holds: only what its ``__str__`` reads."""

    _target_id = "o42"
    _gateway_client = _GoneGateway()


def test_a_java_failure_whose_jvm_is_gone_is_reported_with_what_py4j_kept() -> None:
    exc = Py4JJavaError("An error occurred while calling o42.save.\n", _JavaException())
    assert _interruption(exc) is None  # not a stop: it is a failure
    message = str(_for_spark(exc, _interruption(exc)))
    assert message == (
        "silver micro-batch failed: Py4JJavaError: An error occurred while calling o42.save. "
        "(its text is unavailable: Py4JNetworkError)"
    )


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_any_exception_whose_text_raises_is_still_reported() -> None:
    message = str(_for_spark(_Unprintable(), _interruption(_Unprintable())))
    assert message == (
        "silver micro-batch failed: _Unprintable: (its text is unavailable: RuntimeError)"
    )
