"""The YugabyteDB wire peer (:mod:`tests.ybmodel.wire`) as any PostgreSQL client sees it: what
it answers from the model, what it proxies to the real PostgreSQL (``pg_dsn``), and the errors
it gives where YugabyteDB has no answer (never a silent one from the real server)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.ybmodel.vwal import INT4_OID, Table, YbModel
from tests.ybmodel.wire import YB_VERSION, YbPeer

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def peer(pg_dsn: str) -> Iterator[YbPeer]:
    model = YbModel(tablets=2)
    model.create_table(Table("public", "t", 1, (("id", INT4_OID),), ("id",), "d"))
    started = YbPeer(model, pg_dsn).start()
    yield started
    started.close()


def connect(peer: YbPeer, pg_dsn: str, *, replication: bool = False) -> psycopg.Connection:
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    conninfo = psycopg.conninfo.make_conninfo(
        host="127.0.0.1",
        port=str(peer.port),
        user=str(info.get("user", "postgres")),
        dbname=str(info.get("dbname", "postgres")),
        **({"replication": "database"} if replication else {}),
    )
    return psycopg.connect(conninfo, autocommit=True)


def test_the_walsender_serves_the_replication_commands_and_refuses_the_rest(
    peer: YbPeer, pg_dsn: str
) -> None:
    with connect(peer, pg_dsn, replication=True) as repl:
        system = repl.execute("IDENTIFY_SYSTEM").fetchone()
        assert system is not None and system[3] == repl.info.dbname
        row = repl.execute('CREATE_REPLICATION_SLOT "s1" LOGICAL "yboutput" HYBRID_TIME').fetchone()
        assert row is not None and row[0] == "s1" and row[3] == "yboutput"
        assert peer.model.slots["s1"].lsn_type == "HYBRID_TIME"
        assert row[2] == str(peer.model.slots["s1"].consistent_ht)  # the snapshot's hybrid time
        with pytest.raises(psycopg.errors.DuplicateObject, match="already exists"):
            repl.execute('CREATE_REPLICATION_SLOT "s1" LOGICAL "yboutput"')
        with pytest.raises(psycopg.errors.SyntaxError, match="does not understand"):
            repl.execute("TIMELINE_HISTORY 1")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="option: messages"):
            # YugabyteDB's pgoutput is PostgreSQL 11's
            repl.execute(
                "START_REPLICATION SLOT s1 LOGICAL 0/0 (proto_version '1', "
                "publication_names 'p', messages 'true')"
            )
        with pytest.raises(psycopg.errors.UndefinedObject, match="does not exist"):
            repl.execute("START_REPLICATION SLOT nope LOGICAL 0/0 (proto_version '1')")


def test_the_proxy_answers_what_yugabytedb_answers_differently(peer: YbPeer, pg_dsn: str) -> None:
    with connect(peer, pg_dsn, replication=True) as repl:
        repl.execute("CREATE_REPLICATION_SLOT s2 LOGICAL pgoutput")
    with connect(peer, pg_dsn) as conn:
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)  # the real server
        version = conn.execute("SELECT current_setting('server_version_num'), version()")
        assert version.fetchone() == ("110002", YB_VERSION)
        query = (
            "SELECT confirmed_flush_lsn::text, plugin, active, yb_restart_commit_ht::text"
            " FROM pg_replication_slots WHERE slot_name = %s"
        )
        ht = str(peer.model.slots["s2"].consistent_ht)
        for _ in range(7):  # past psycopg's prepare threshold: a named prepared statement
            assert conn.execute(query, ("s2",)).fetchone() == ("0/1", "pgoutput", False, ht)
        assert conn.execute(query, ("missing",)).fetchone() is None
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="not supported by Yuga"):
            conn.execute("SELECT pg_current_wal_lsn()")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="does not model"):
            conn.execute("SELECT slot_name FROM pg_replication_slots")
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            conn.execute(f"SET LOCAL yb_read_time TO '{ht} ht'")  # the exported snapshot
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="consistent point"):
            conn.execute("SET LOCAL yb_read_time TO '12345 ht'")
        drop = "SELECT pg_drop_replication_slot(%s)"
        conn.execute(drop, ("s2",))
        assert "s2" not in peer.model.slots
        with pytest.raises(psycopg.errors.UndefinedObject):
            conn.execute(drop, ("s2",))
