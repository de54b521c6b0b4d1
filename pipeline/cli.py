"""The ``medallion`` command line: a thin shell over the library.

Only this module configures logging handlers. Every command turns a :class:`PipelineError`
into a one-line message, a hint and a non-zero exit code instead of a stack trace.
"""

from __future__ import annotations

import functools
import logging
import sys
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from pipeline import run_report
from pipeline.errors import ConfigError, NotBuiltError, PipelineError, Retryable, Terminal
from pipeline.shutdown import DropRequestedShutdown, Shutdown, ShutdownRequested

__all__ = ["run", "cli"]

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_CONFIG = 2
EXIT_NOT_BUILT = 3
EXIT_RETRYABLE = 75  # EX_TEMPFAIL: schedulers may retry

SHUTDOWN = Shutdown()
"""SIGTERM/SIGINT handling of this process (see :mod:`pipeline.shutdown`)."""


class Output(ABC):
    """How a command prints its result."""

    @abstractmethod
    def result(self, title: str, rows: Sequence[dict[str, Any]]) -> None:
        """Print rows under a title."""

    @abstractmethod
    def message(self, text: str) -> None:
        """Print a line of text."""


class TextOutput(Output):
    """Aligned plain-text tables."""

    def result(self, title: str, rows: Sequence[dict[str, Any]]) -> None:
        """Print rows as an aligned table."""
        click.echo(title)
        if not rows:
            click.echo("  (none)")
            return
        cols = list(rows[0])
        widths = {c: max(len(c), *(len(_cell(r.get(c))) for r in rows)) for c in cols}
        click.echo("  " + "  ".join(c.ljust(widths[c]) for c in cols))
        for r in rows:
            click.echo("  " + "  ".join(_cell(r.get(c)).ljust(widths[c]) for c in cols))

    def message(self, text: str) -> None:
        """Print a line."""
        click.echo(text)


class JsonOutput(Output):
    """One JSON document per command, for schedulers: the results and messages are kept and
    printed at the end with the exit code, its meaning and the per-stage timings
    (:mod:`pipeline.run_report`)."""

    def result(self, title: str, rows: Sequence[dict[str, Any]]) -> None:
        """Keep rows for the document."""
        run_report.add_result(title, rows)

    def message(self, text: str) -> None:
        """Keep a message for the document."""
        run_report.add_message(text)


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_retryable(exc: BaseException) -> bool:
    """Whether running again may help: the first error in the ``__cause__`` chain that carries
    a marker decides, so a terminal error (a wrong password) wrapped by a stage stays terminal
    and a retryable one (a lost connection) stays retryable."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, Terminal):
            return False
        if isinstance(current, Retryable):
            return True
        current = current.__cause__
    return False


def reconcile_wanted(flag: bool | None, config: Any) -> bool:
    """Whether ``medallion quality`` reconciles: ``--reconcile``/``--no-reconcile`` when
    given, else what the config schedules (``quality.reconcile.interval.seconds`` not null), so
    a scheduled quality run does not pass while gold differs from the source."""
    if flag is not None:
        return flag
    return config.quality.reconcile_interval_seconds is not None


def _run_command(func: Callable[..., Any], args: Any, kwargs: Any) -> tuple[int, str | None]:
    """Run a command: ``(exit code, error message)``; a PipelineError's message and hint go to
    stderr."""
    try:
        func(*args, **kwargs)
    except SystemExit as exc:
        from pipeline.process_exit import exit_code_of

        return exit_code_of(exc), None
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code, exc.format_message()
    except ShutdownRequested as exc:
        logger.warning("stopped on %s", exc.signal_name)
        return exc.exit_code, f"stopped on {exc.signal_name}"
    except ConfigError as exc:
        click.echo(f"configuration error: {exc}", err=True)
        return EXIT_CONFIG, f"configuration error: {exc}"
    except NotBuiltError as exc:
        click.echo(f"not built yet: {exc}", err=True)
        return EXIT_NOT_BUILT, f"not built yet: {exc}"
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        cause = exc.__cause__
        if cause is not None and not isinstance(cause, PipelineError):
            click.echo(f"  caused by {type(cause).__name__}: {cause}", err=True)
        if is_retryable(exc):
            click.echo("  this error is transient: run the command again", err=True)
            return EXIT_RETRYABLE, f"error: {exc}"
        return EXIT_ERROR, f"error: {exc}"
    return 0, None


def catch_exception(func: F) -> F:
    """Report PipelineErrors as a message and an exit code instead of a traceback; with
    ``--output json``, print the command's one JSON document (even when it failed)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context(silent=True)
        report = run_report.begin(ctx.info_name if ctx and ctx.info_name else func.__name__)
        as_json = bool(args) and isinstance(getattr(args[0], "output", None), JsonOutput)
        try:
            code, error = _run_command(func, args, kwargs)
        except Exception as exc:  # a bug: the document says so, then its traceback
            if as_json:
                click.echo(report.render(EXIT_ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        if as_json:
            click.echo(report.render(code, error))
        if code:
            sys.exit(code)

    return wrapper  # type: ignore[return-value]


class _State:
    def __init__(self, config_path: str | None, output: Output, *, log_level_given: bool) -> None:
        self.config_path = config_path
        self.output = output
        self.log_level_given = log_level_given
        self._config: Any = None

    @property
    def config(self) -> Any:
        if self._config is None:
            from pipeline.config import load_config

            self._config = load_config(self.config_path)
            if not self.log_level_given:
                # The handlers exist before the config is read (so loading it can log); its
                # logging.level applies from here on, below --log-level / $MEDALLION_LOG_LEVEL.
                logging.getLogger().setLevel(self._config.logging.level)
        return self._config


@click.group()
@click.option(
    "--config",
    "config_path",
    envvar="MEDALLION_CONFIG",
    type=click.Path(dir_okay=False),
    default=None,
    help="Pipeline YAML (default: $MEDALLION_CONFIG or ./conf/pipeline.yaml).",
)
@click.option(
    "--log-level",
    envvar="MEDALLION_LOG_LEVEL",
    default=None,
    help="Log level [default: the config's logging.level, else INFO].",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, log_level: str | None, output: str) -> None:
    """medallion: Debezium-compatible change data capture into a Delta Lake medallion."""
    from pipeline.config import LOG_LEVEL_DEFAULT

    logging.basicConfig(
        level=(log_level or LOG_LEVEL_DEFAULT).upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, DropRequestedShutdown) for f in handler.filters):
            handler.addFilter(DropRequestedShutdown())
    SHUTDOWN.install()
    ctx.obj = _State(
        config_path,
        JsonOutput() if output == "json" else TextOutput(),
        log_level_given=log_level is not None,
    )


@cli.command()
@click.option("--source", "-s", "sources", multiple=True, help="Source name(s); default: all.")
@click.option("--follow", is_flag=True, help="Keep polling for new records.")
@click.option("--max-batches", type=int, default=None, help="Stop after this many batches.")
@click.option(
    "--metrics-address",
    default=None,
    metavar="HOST:PORT",
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (default: the config's "
    "metrics.address; none). Only with --follow.",
)
@click.pass_obj
@catch_exception
def capture(
    state: _State,
    sources: tuple[str, ...],
    follow: bool,
    max_batches: int | None,
    metrics_address: str | None,
) -> None:
    """Land change records from the configured sources into bronze, exactly once."""
    from pipeline.orchestration import land_sources

    _serve_metrics(state, metrics_address, "--follow", follow, sources or None)
    SHUTDOWN.cooperative = True
    try:
        with run_report.stage("capture", "land"):
            results = land_sources(
                state.config, sources, follow=follow, max_batches=max_batches, stop=SHUTDOWN.stop
            )
    finally:
        SHUTDOWN.cooperative = False
    if SHUTDOWN.received is not None:
        logger.warning("capture stopped on %s after its last committed batch", SHUTDOWN.received)
    state.output.result(
        "landed",
        [
            {
                "source": r.source,
                "batches": r.batches,
                "read": r.read,
                "landed": r.landed,
                "quarantined": r.quarantined,
                "last_batch": r.last_batch_seq,
            }
            for r in results
        ],
    )


@cli.command()
@click.pass_obj
@catch_exception
def status(state: _State) -> None:
    """Show per source and table where each layer stands.

    Per source: committed bronze batch, landed rows and recent events/s, quarantined events in
    bronze and silver, the newest position in bronze, silver and gold, the lags source ->
    bronze -> silver -> gold in seconds of source time, consistent cuts gold has not moved to
    yet, and for a ``postgresql`` source its replication slot: whether a consumer is connected
    (``slot_active``), WAL not yet acknowledged (``slot_lag_bytes``), WAL retained for it
    (``retained_wal_bytes``) and WAL that can still be written before ``max_slot_wal_keep_size``
    invalidates it (``retention_headroom_bytes``; empty: unlimited). An unreachable server or a
    missing slot shows in ``slot_error``. Per source too: change events waiting in
    ``silver/_pending`` for their transaction (``waiting_events``, ``waiting_transactions``, age of
    the oldest in ``waiting_oldest_s``) and tables needing a re-snapshot. Per table: silver and
    gold versions, last position applied, quarantined events, and ``needs_resnapshot`` (a column
    added with a default silver cannot reproduce, with the reason).
    """
    from pipeline.status import pipeline_status

    with run_report.stage("status", "read"):
        sources, tables = pipeline_status(state.config)
    state.output.result("sources", sources)
    state.output.result("tables", tables)


@cli.command(name="run")
@click.option("--once", "mode", flag_value="once", default=True, help="Process what is there.")
@click.option("--continuous", "mode", flag_value="continuous", help="Keep processing.")
@click.option(
    "--interval",
    type=float,
    default=1.0,
    show_default=True,
    help="Seconds between micro-batches with --continuous (a micro-batch that takes longer "
    "starts the next at once; an idle trigger only reads bronze's new log entries).",
)
@click.option("--no-quality", is_flag=True, help="Publish gold without running the checks.")
@click.option(
    "--metrics-address",
    default=None,
    metavar="HOST:PORT",
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (default: the config's "
    "metrics.address; none). Only with --continuous.",
)
@click.pass_obj
@catch_exception
def run_cmd(
    state: _State, mode: str, interval: float, no_quality: bool, metrics_address: str | None
) -> None:
    """Bronze -> silver (MERGE, exactly once, in source order) -> gold at the newest consistent
    cut that passes its blocking quality checks."""
    from pipeline.orchestration import run_pipeline

    _serve_metrics(state, metrics_address, "--continuous", mode == "continuous", ())
    rows, gold = run_pipeline(
        state.config,
        continuous=mode == "continuous",
        interval=interval,
        run_checks=False if no_quality else None,
    )
    state.output.result("silver", rows)
    if gold is not None:
        _print_gold(state.output, gold)


def _serve_metrics(
    state: _State,
    flag: str | None,
    mode: str,
    long_running: bool,
    logs_of: tuple[str, ...] | None,
) -> None:
    """Start the Prometheus endpoint of a long-running command: ``--metrics-address``, else the
    config's ``metrics.address``; a one-shot command serves none (it would be gone before the
    first scrape), and the flag without ``mode`` is a usage error.

    Args:
        state: The command's state.
        flag: ``--metrics-address``.
        mode: The option that makes the command long-running.
        long_running: Whether it was given.
        logs_of: Sources whose database log to report (None: every configured source; the
            capture agent reports them, ``run`` reports none).
    """
    if flag is not None and not long_running:
        raise click.UsageError(f"--metrics-address serves a long-running command: add {mode}")
    address = flag if flag is not None else state.config.metrics.address
    if address is None or not long_running:
        return
    from pipeline import metrics

    logs = state.config.source_names if logs_of is None else logs_of
    metrics.start(state.config, address, tuple(logs))


def _print_gold(output: Output, gold: Any) -> None:
    output.result(
        "gold",
        [
            {
                "source": source,
                "status": "held"
                if source in gold.held
                else "moved"
                if source in gold.published
                else "unchanged",
                "silver_batch": cut.silver_batch,
                "source_time": cut.source_time,
                "tables": len(cut.tables),
            }
            for source, cut in sorted(gold.current.items())
        ]
        + [
            {
                "source": source,
                "status": "held (never published)",
                "silver_batch": cut.silver_batch,
                "source_time": cut.source_time,
                "tables": len(cut.tables),
            }
            for source, cut in sorted(gold.held.items())
            if source not in gold.current
        ],
    )
    if gold.quality is not None:
        _print_quality(output, gold.quality)
    if gold.derived:
        output.result(
            "gold tables rebuilt",
            [{"table": d.name, "rows": d.rows, "version": d.version} for d in gold.derived],
        )


def _print_quality(output: Output, run: Any) -> None:
    output.result(
        f"quality run {run.run_id}",
        [
            {
                "source": r.source,
                "table": r.table,
                "check": r.check,
                "severity": str(r.severity),
                "ok": r.success,
                "observed": r.observed,
            }
            for r in run.results
            if not r.success
        ],
    )
    output.message(
        f"checks: {run.passed} passed, {run.warned} failed (warn), "
        f"{len(run.blocking_failures)} failed (block); report: {run.report_path}"
    )


@cli.command()
@click.option("--source", "-s", "sources", multiple=True, help="Source name(s); default: all.")
@click.option(
    "--reconcile/--no-reconcile",
    default=None,
    help="Also reconcile gold with each database source (default: when the config schedules "
    "reconciliation, i.e. quality.reconcile.interval.seconds is not null).",
)
@click.pass_obj
@catch_exception
def quality(state: _State, sources: tuple[str, ...], reconcile: bool | None) -> None:
    """Run the data-quality checks on the gold cut each source shows (or, before the first
    publication, its newest consistent cut); write the results table and the HTML report.
    Exits 1 when a blocking check fails."""
    from pipeline.orchestration import run_quality_now

    wanted = reconcile_wanted(reconcile, state.config)
    with run_report.stage("quality", "reconcile and checks" if wanted else "checks"):
        run = run_quality_now(state.config, sources, reconcile=wanted)
    _print_quality(state.output, run)
    if run.blocking_failures:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.argument("source")
@click.option("--ranges", type=int, default=16, show_default=True, help="Key ranges to hash.")
@click.option(
    "--repair",
    is_flag=True,
    help="Snapshot the differing keys again (an incremental snapshot limited to them), wait "
    "until it is in bronze (landed by the running capture agent, or here when none runs), run "
    "silver and gold once and reconcile again.",
)
@click.option(
    "--agent-wait",
    type=float,
    default=15.0,
    show_default=True,
    help="--repair: seconds without the source's committed offset moving that mean no capture "
    "agent is running (this command then lands the source itself).",
)
@click.pass_obj
@catch_exception
def reconcile(state: _State, source: str, ranges: int, repair: bool, agent_wait: float) -> None:
    """Compare every captured table of SOURCE with its gold view: row counts, a hash per
    primary-key range and the differing keys, then every value of an independent read of the
    database with silver, per column (differing values with examples, columns not comparable
    because the config makes them lossy). Exits 1 when they differ (after --repair: when they
    still differ)."""
    from pipeline.orchestration import reconcile_now

    if repair:
        from gold.reconcile_repair import repair_now

        with run_report.stage("reconcile", "repair"):
            repaired = repair_now(state.config, source, ranges=ranges, agent_wait_s=agent_wait)
        state.output.result(f"reconcile {source}", repaired.before.rows())
        state.output.result(f"reconcile {source}: repair", repaired.rows())
        if repaired.landed_by:
            state.output.message(f"the repair's snapshot was landed by: {repaired.landed_by}")
        if repaired.after is not None:
            state.output.result(f"reconcile {source}: after the repair", repaired.after.rows())
        if not repaired.success:
            sys.exit(EXIT_ERROR)
        return
    with run_report.stage("reconcile", "compare"):
        result = reconcile_now(state.config, source, ranges=ranges)
    state.output.result(f"reconcile {source}", result.rows())
    state.output.result(f"reconcile {source}: values", result.value_rows())
    if not result.success:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.argument("source")
@click.argument(
    "action",
    type=click.Choice(
        ["execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot", "log"]
    ),
)
@click.option("--table", "-t", "tables", multiple=True, help="A table (schema.table); repeatable.")
@click.option(
    "--type",
    "kind",
    type=click.Choice(["incremental", "blocking"]),
    default="incremental",
    show_default=True,
    help="The snapshot's type (execute-snapshot).",
)
@click.option(
    "--condition",
    default=None,
    help="An SQL filter on the (single) table: additional-conditions (execute-snapshot).",
)
@click.option("--message", default=None, help="The text of a 'log' signal.")
@click.pass_obj
@catch_exception
def signal(
    state: _State,
    source: str,
    action: str,
    tables: tuple[str, ...],
    kind: str,
    condition: str | None,
    message: str | None,
) -> None:
    """Send a signal to SOURCE's capture agent: a row of its signaling table
    (signal.data.collection), else a line of its signal.file. The running agent acts on it
    when it reads it (see docs/signals.md)."""
    from capture.signals_send import send

    with run_report.stage("signal", "send"):
        where = send(state.config, source, action, tables, kind, condition, message)
    state.output.message(f"signal {action} sent to {source} through the {where}")


@cli.command()
@click.option(
    "--lake",
    type=click.Path(file_okay=False),
    default=None,
    help="Lake root for the demo (default: the config's lake root).",
)
@click.pass_obj
@catch_exception
def demo(state: _State, lake: str | None) -> None:
    """Land the demo sources into bronze and read them back through Spark SQL."""
    from pipeline.demo import run_demo

    run_demo(state.config, state.output, lake_root=Path(lake) if lake else None)


def run() -> None:
    """Console entry point: the command, then :func:`~pipeline.process_exit.exit_process`, so
    a run that succeeded exits 0 and not with an abort from native threads at teardown."""
    from pipeline.process_exit import exit_code_of, exit_process

    try:
        cli(prog_name="medallion")
        code = 0
    except SystemExit as exc:
        code = exit_code_of(exc)
    except Exception:  # a bug, not a PipelineError: its traceback, then the same clean exit
        traceback.print_exc()
        code = EXIT_ERROR
    exit_process(code)


if __name__ == "__main__":
    run()
