"""The DDL parser against a real MariaDB: a state built from a DDL history equals one built from
``SHOW CREATE TABLE`` of the resulting tables.

Every statement below runs on the server and is applied to one :class:`SchemaState`; afterwards
``SHOW CREATE TABLE`` of every table is applied to a second, fresh state. The two must agree table
by table. Only values the server fills in where the statement left them out are normalised (see
:func:`_normalised`); everything else must match exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from capture.mysql.ddl import SchemaState
from capture.mysql.schema import ColumnDef, TableDef

pytestmark = pytest.mark.mysql

DB = "ddl_catalog"
DB2 = "ddl_catalog_other"

# Statements run in DB (qualified names reach DB2). Each one is applied exactly as executed.
HISTORY = [
    f"CREATE DATABASE {DB2} CHARACTER SET latin1",
    # Every column type, with and without parameters.
    """CREATE TABLE types (
        id SERIAL,
        ti TINYINT, ti4 TINYINT(4) UNSIGNED, si SMALLINT UNSIGNED ZEROFILL, mi MEDIUMINT(5),
        i INT NOT NULL DEFAULT -1, ig INTEGER, bi BIGINT(20) UNSIGNED, i1 INT1, i8 INT8,
        b BOOL DEFAULT TRUE, bo BOOLEAN, bt BIT, bt9 BIT(9) DEFAULT b'101',
        d DECIMAL, d5 DEC(5), nu NUMERIC(12,4) UNSIGNED, fx FIXED(6,2),
        f FLOAT, f10 FLOAT(10), f30 FLOAT(30), fmd FLOAT(7,3), db DOUBLE, dp DOUBLE PRECISION,
        dmd DOUBLE(10,2), r REAL,
        dt DATE, tm TIME, tm3 TIME(3), dtm DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6),
        ts TIMESTAMP NULL, ts2 TIMESTAMP(2) NOT NULL DEFAULT '2020-01-01 00:00:00', y YEAR,
        c CHAR, c10 CHARACTER(10), vc VARCHAR(255) NOT NULL DEFAULT '', cv CHARACTER VARYING(7),
        nc NATIONAL CHAR(3), nvc NVARCHAR(9), nv NATIONAL VARCHAR(4), nch NCHAR(2),
        lat VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci,
        col VARCHAR(20) COLLATE utf8mb4_unicode_ci, vbin VARCHAR(10) BINARY,
        cbin CHAR(4) CHARACTER SET binary, tbin TEXT CHARSET binary,
        bn BINARY, bn16 BINARY(16), vb VARBINARY(300),
        tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT, lv LONG VARCHAR, lg LONG,
        tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB, lvb LONG VARBINARY,
        e ENUM('a', 'b''c', 'd\\\\e', 'x y') NOT NULL DEFAULT 'a',
        s SET('r','w','x') CHARACTER SET ascii,
        j JSON, j2 LONGTEXT CHECK (json_valid(j2)),
        j3 LONGTEXT CHARSET latin1 CHECK (json_valid(j3)),
        g GEOMETRY, pt POINT NOT NULL, ls LINESTRING, pg POLYGON, mpt MULTIPOINT,
        mls MULTILINESTRING, mpg MULTIPOLYGON, gc GEOMETRYCOLLECTION,
        u UUID, ip6 INET6, ip4 INET4,
        gen INT AS (i + 1) VIRTUAL, gen2 VARCHAR(40) GENERATED ALWAYS AS (concat(vc, '-')) STORED,
        gen3 BIGINT AS (bi * 2) PERSISTENT,
        cmt INT COMMENT 'a comment, with (parens)', inv INT INVISIBLE,
        chk INT CHECK (chk > 0),
        UNIQUE KEY (vc), UNIQUE (ti, si), KEY (mi), UNIQUE KEY uq_tx (tx(20)),
        FULLTEXT KEY (mt), SPATIAL KEY sp (pt)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='all the types'""",
    # Executable comments and ordinary comments.
    """CREATE TABLE /* a comment */ exec_cmt (
        id INT /*!50000 NOT NULL */ PRIMARY KEY, -- line comment
        a INT, # hash comment
        /*M!100100 b VARCHAR(3), */ c INT
    ) /*!40101 ENGINE=InnoDB */""",
    # A table with keys that ALTERs will reshape.
    """CREATE TABLE `Orders` (
        id INT NOT NULL AUTO_INCREMENT,
        customer VARCHAR(50) NOT NULL,
        code CHAR(8) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL,
        note TEXT,
        amount DECIMAL(12,2) UNSIGNED ZEROFILL,
        PRIMARY KEY (id),
        CONSTRAINT uq_code UNIQUE KEY (code),
        UNIQUE KEY uq_cust (customer(10), code),
        KEY idx_amount (amount DESC),
        CONSTRAINT chk_amount CHECK (amount >= 0)
    ) ENGINE=InnoDB AUTO_INCREMENT=10 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci""",
    "ALTER TABLE Orders ADD COLUMN status ENUM('new','paid') NOT NULL DEFAULT 'new' AFTER customer",
    "ALTER TABLE Orders ADD created_at DATETIME(6) NOT NULL DEFAULT current_timestamp(6) FIRST",
    "ALTER TABLE Orders ADD (a1 INT, a2 VARCHAR(5) CHARSET latin1), ADD COLUMN a3 INT",
    "ALTER TABLE Orders ADD COLUMN IF NOT EXISTS a1 BIGINT",
    "ALTER TABLE Orders DROP COLUMN a1, DROP a2, DROP COLUMN IF EXISTS not_there",
    "ALTER TABLE Orders CHANGE COLUMN customer customer_name VARCHAR(80) NOT NULL AFTER code",
    "ALTER TABLE Orders CHANGE a3 a3 SMALLINT UNSIGNED FIRST",
    "ALTER TABLE Orders MODIFY note MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
    "ALTER TABLE Orders MODIFY COLUMN a3 INT NOT NULL AFTER note",
    "ALTER TABLE Orders RENAME COLUMN amount TO total",
    "ALTER TABLE Orders ALTER COLUMN status SET DEFAULT 'paid', ALTER note DROP DEFAULT",
    "ALTER TABLE Orders ALTER status DROP DEFAULT",
    "ALTER TABLE Orders ADD CONSTRAINT uq_created UNIQUE (created_at, id)",
    "ALTER TABLE Orders ADD UNIQUE INDEX (total), ADD UNIQUE (a3)",
    "ALTER TABLE Orders DROP CONSTRAINT uq_code, ADD CONSTRAINT IF NOT EXISTS ck CHECK (total < 9)",
    "ALTER TABLE Orders ADD UNIQUE KEY IF NOT EXISTS uq_cust (note(5))",
    "ALTER TABLE Orders RENAME INDEX uq_created TO uq_created_id",
    "ALTER TABLE Orders ADD INDEX idx_status (status), ALGORITHM=INPLACE, LOCK=NONE",
    "ALTER TABLE Orders DROP PRIMARY KEY, ADD PRIMARY KEY (id, created_at)",
    "ALTER TABLE Orders ENGINE=InnoDB, COMMENT='orders', ROW_FORMAT=DYNAMIC",
    "ALTER IGNORE TABLE Orders ADD COLUMN extra INT DEFAULT 0 COMMENT 'x' AFTER id",
    "ALTER TABLE Orders DROP COLUMN a3",
    "ALTER TABLE Orders ADD KEY k_extra (extra)",
    "ALTER TABLE Orders DROP KEY k_extra, ADD INDEX IF NOT EXISTS idx_status (extra)",
    "ALTER TABLE Orders FORCE",
    "ALTER TABLE Orders RENAME TO orders_v2",
    f"ALTER TABLE orders_v2 RENAME AS {DB2}.orders",
    # Keys of a table without a primary key: the server re-sorts unique keys after each change.
    """CREATE TABLE nopk (a INT NOT NULL, b VARCHAR(10), c INT NOT NULL,
        UNIQUE KEY ub (b), UNIQUE KEY uc (c), UNIQUE KEY (a, c), KEY a_2 (b))""",
    "ALTER TABLE nopk ADD UNIQUE (a)",
    "ALTER TABLE nopk MODIFY b VARCHAR(10) NOT NULL",
    "ALTER TABLE nopk DROP COLUMN b",
    # Quoted names, column names in another case, inline keys, DEFAULT expressions.
    """CREATE TABLE m (id INT, `we``ird col` INT, `ünï` VARCHAR(3), k INT,
        PRIMARY KEY (id), UNIQUE (k))""",
    "ALTER TABLE m MODIFY ID BIGINT",
    "ALTER TABLE m CHANGE K kk INT NOT NULL",
    """ALTER TABLE m ADD COLUMN s INT SERIAL DEFAULT VALUE,
        ADD COLUMN d1 VARCHAR(36) DEFAULT uuid(), ADD d2 INT DEFAULT (1+2),
        ADD d3 DATETIME DEFAULT now() ON UPDATE now(),
        ADD d4 VARCHAR(3) DEFAULT _utf8mb4'ab' COLLATE utf8mb4_bin,
        ADD j3 LONGTEXT CHECK (json_valid(`ünï`))""",
    "ALTER TABLE m ADD COLUMN p2 INT UNIQUE KEY AFTER id",
    "ALTER TABLE m CHANGE COLUMN IF EXISTS nope nope2 INT, MODIFY IF EXISTS nope3 INT",
    "ALTER TABLE IF EXISTS m DROP INDEX IF EXISTS nope4, ADD COLUMN IF NOT EXISTS kk INT",
    "CREATE TABLE m2 (a INT, b INT)",
    "ALTER TABLE m2 ADD COLUMN id INT PRIMARY KEY FIRST",
    "ALTER TABLE m2 MODIFY id BIGINT",
    "CREATE TABLE m3 (a INT, b INT, PRIMARY KEY (a))",
    "ALTER TABLE m3 DROP COLUMN a",
    "ALTER TABLE m3 ADD COLUMN c TEXT, ADD UNIQUE (c(10))",
    # Table names are case-sensitive.
    "CREATE TABLE CaseT (a INT)",
    "CREATE TABLE caset (b INT)",
    # MariaDB system versioning: implicit row_start/row_end columns that binlog rows carry.
    "CREATE TABLE sv (id INT PRIMARY KEY, a INT) WITH SYSTEM VERSIONING",
    "ALTER TABLE sv ADD COLUMN c INT",
    "CREATE TABLE sv_col (a INT WITH SYSTEM VERSIONING, b INT)",
    """CREATE TABLE sv_rows (id INT,
        rs TIMESTAMP(6) GENERATED ALWAYS AS ROW START INVISIBLE,
        re TIMESTAMP(6) GENERATED ALWAYS AS ROW END INVISIBLE,
        PERIOD FOR SYSTEM_TIME (rs, re)) WITH SYSTEM VERSIONING""",
    "CREATE TABLE sv_add (id INT)",
    "ALTER TABLE sv_add ADD SYSTEM VERSIONING, ADD COLUMN z INT",
    "CREATE TABLE sv_drop (id INT) WITH SYSTEM VERSIONING",
    "ALTER TABLE sv_drop DROP SYSTEM VERSIONING",
    # Index statements.
    "CREATE TABLE idx (id INT PRIMARY KEY, a INT, b VARCHAR(30), c INT)",
    "CREATE UNIQUE INDEX ux_a ON idx (a)",
    "CREATE INDEX ix_b ON idx (b(5))",
    "CREATE UNIQUE INDEX ux_bc USING BTREE ON idx (b, c DESC)",
    "CREATE INDEX ix_ac ON idx (a, c)",
    "DROP INDEX ux_a ON idx",
    "ALTER TABLE idx DROP COLUMN a",
    # Character sets.
    "CREATE TABLE cs (id INT KEY, a VARCHAR(10), b CHAR(2), e ENUM('x')) CHARSET latin1",
    "ALTER TABLE cs CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
    "ALTER TABLE cs DEFAULT CHARACTER SET = latin1, ADD COLUMN z VARCHAR(3)",
    """CREATE TABLE cv (a TINYTEXT, b TEXT, c MEDIUMTEXT, d VARCHAR(10), e LONGTEXT,
        f TEXT CHARSET ucs2, g TINYTEXT CHARSET utf8mb3) CHARSET latin1""",
    "ALTER TABLE cv CONVERT TO CHARACTER SET utf8mb4",  # text types grow to fit
    "CREATE TABLE cv2 (a TINYTEXT, b TEXT, f TINYTEXT CHARSET latin1) CHARSET utf8mb3",
    "ALTER TABLE cv2 CONVERT TO CHARACTER SET ucs2",
    f"CREATE TABLE {DB2}.in_other (id INT UNSIGNED NOT NULL PRIMARY KEY, v VARCHAR(5))",
    # Renames, including a swap through a temporary name.
    "CREATE TABLE swap_a (a INT)",
    "CREATE TABLE swap_b (b VARCHAR(5) NOT NULL PRIMARY KEY)",
    "RENAME TABLE swap_a TO swap_tmp, swap_b TO swap_a, swap_tmp TO swap_b",
    f"RENAME TABLE exec_cmt TO {DB2}.exec_moved",
    # LIKE, IF NOT EXISTS, OR REPLACE, AS SELECT, DROP, TRUNCATE.
    "CREATE TABLE types_copy LIKE types",
    "CREATE TABLE IF NOT EXISTS swap_a (other INT)",
    "CREATE TABLE repl (a INT)",
    "CREATE OR REPLACE TABLE repl (x BIGINT UNSIGNED NOT NULL, y DATE, UNIQUE KEY (x))",
    "CREATE TABLE ctas (id INT PRIMARY KEY, v VARCHAR(10)) SELECT 1 AS id, 'x' AS v",
    "CREATE TABLE gone1 (a INT)",
    "CREATE TABLE gone2 (a INT)",
    "DROP TABLE gone1, gone2 /* generated by server */",
    "TRUNCATE TABLE repl",
    "CREATE TEMPORARY TABLE tmp_ignored (a INT)",
    # Foreign keys, checks and partitions are parsed past.
    """CREATE TABLE parent (id INT NOT NULL, PRIMARY KEY (id))""",
    """CREATE TABLE child (
        id INT NOT NULL PRIMARY KEY,
        parent_id INT,
        CONSTRAINT fk_parent FOREIGN KEY (parent_id) REFERENCES parent (id)
            ON DELETE CASCADE ON UPDATE SET NULL,
        CHECK (id > 0)
    )""",
    "ALTER TABLE child DROP FOREIGN KEY fk_parent, ADD COLUMN w INT",
    """CREATE TABLE parts (id INT NOT NULL, d DATE NOT NULL, PRIMARY KEY (id, d))
        PARTITION BY RANGE (YEAR(d)) (
            PARTITION p0 VALUES LESS THAN (2000), PARTITION p1 VALUES LESS THAN MAXVALUE)""",
    "ALTER TABLE parts ADD COLUMN note VARCHAR(10), ALGORITHM=COPY",
]

# The server's display widths for integer types written without one (signed, unsigned).
_INT_WIDTHS = {
    "tinyint": (4, 3),
    "smallint": (6, 5),
    "mediumint": (9, 8),
    "int": (11, 10),
    "bigint": (20, 20),
}
_DEFAULT_LENGTHS = {"bit": 1, "char": 1, "binary": 1, "year": 4}
_TEXT = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set")


def _normalised_column(column: ColumnDef, table_charset: str | None) -> ColumnDef:
    """Fill in what the server fills in when the statement leaves it out.

    * Integer display widths, ``bit``/``char``/``binary`` length 1, ``year(4)`` and
      ``decimal(10,0)`` are server defaults the statement does not write (the parser records
      only what is written, as the TableDef docstring says).
    * ``float(p)`` is stored as ``float`` (p <= 24) or ``double`` and shown without p.
    * The column charset: ``SHOW CREATE TABLE`` leaves out a charset equal to the table's and
      shows one the statement never wrote (after a table default changed), so only the effective
      charset (column's, else table's) is comparable.
    """
    length, scale, type_name = column.length, column.scale, column.type_name
    if type_name in _INT_WIDTHS and length is None:
        length = _INT_WIDTHS[type_name][1 if column.unsigned else 0]
    elif type_name in _DEFAULT_LENGTHS and length is None:
        length = _DEFAULT_LENGTHS[type_name]
    elif type_name == "decimal":
        length = 10 if length is None else length
        scale = 0 if scale is None else scale
    elif type_name == "float" and length is not None and scale is None:
        type_name = "float" if length <= 24 else "double"
        length = None
    charset = column.charset
    if type_name in _TEXT or type_name == "json":  # MariaDB's JSON is text with a charset
        charset = charset or table_charset
    return replace(column, type_name=type_name, length=length, scale=scale, charset=charset)


def _normalised(table: TableDef) -> TableDef:
    return replace(
        table, columns=tuple(_normalised_column(c, table.charset) for c in table.columns)
    )


@dataclass
class Replayed:
    """The server after HISTORY ran, and the state HISTORY was applied to."""

    conn: Any
    history: SchemaState


@pytest.fixture(scope="module")
def replayed(mariadb_conn: dict[str, Any]) -> Iterator[Replayed]:
    """Run HISTORY on the server and apply each statement to a state, once for the module."""
    import pymysql

    conn = pymysql.connect(**dict(mariadb_conn), autocommit=True)
    try:
        with conn.cursor() as cur:
            for name in (DB, DB2):
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
            create = f"CREATE DATABASE {DB} CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
            cur.execute(create)
            cur.execute(f"USE {DB}")
            # ALTER of a system-versioned table needs this (else the server refuses).
            cur.execute("SET SESSION system_versioning_alter_history = KEEP")
            history = SchemaState()
            history.apply(create, None)
            for sql in HISTORY:
                cur.execute(sql)
                history.apply(sql, DB)
        yield Replayed(conn, history)
    finally:
        with conn.cursor() as cur:
            for name in (DB, DB2):
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.close()


def _show_create_state(conn: Any) -> SchemaState:
    """A fresh state from ``SHOW CREATE DATABASE`` and ``SHOW CREATE TABLE`` (a snapshot)."""
    state = SchemaState()
    with conn.cursor() as cur:
        for database in (DB, DB2):
            cur.execute(f"SHOW CREATE DATABASE {database}")
            state.apply(cur.fetchone()[1], None)
            cur.execute(f"SHOW FULL TABLES FROM {database} WHERE Table_type = 'BASE TABLE'")
            for name, _kind in cur.fetchall():
                cur.execute(f"SHOW CREATE TABLE `{database}`.`{name}`")
                state.apply(cur.fetchone()[1], database)
    return state


def test_history_equals_show_create_table(replayed: Replayed) -> None:
    history = replayed.history
    snapshot = _show_create_state(replayed.conn)
    names = [(t.database, t.name) for t in history.tables()]
    assert names == [(t.database, t.name) for t in snapshot.tables()]
    assert len(names) == 27
    assert (DB2, "orders") in names and (DB, "Orders") not in names
    assert (DB, "tmp_ignored") not in names and (DB, "gone1") not in names
    for table in history.tables():
        shown = snapshot.table(table.database, table.name)
        assert shown is not None
        assert _normalised(table) == _normalised(shown), table.collection


_CATALOG_COLUMNS = """
    SELECT table_schema, table_name, column_name, data_type, column_type, is_nullable, extra,
           character_set_name, character_maximum_length, numeric_precision, numeric_scale,
           datetime_precision
    FROM information_schema.columns WHERE table_schema IN (%s, %s)
    ORDER BY table_schema, table_name, ordinal_position"""
_CATALOG_KEYS = """
    SELECT table_schema, table_name, index_name, column_name
    FROM information_schema.statistics WHERE table_schema IN (%s, %s) AND non_unique = 0
    ORDER BY table_schema, table_name, index_name, seq_in_index"""


_IMPLICIT_SYSTEM_COLUMNS = (
    ColumnDef("row_start", "timestamp", length=6, nullable=False, generated=True),
    ColumnDef("row_end", "timestamp", length=6, nullable=False, generated=True),
)


def _catalog_column(column: ColumnDef, table: TableDef) -> tuple[Any, ...]:
    """The facts of a column information_schema also has, in its terms."""
    column = _normalised_column(column, table.charset)
    type_name = "longtext" if column.type_name == "json" else column.type_name
    return (
        column.name,
        type_name,
        column.nullable,
        column.unsigned,
        column.auto_increment,
        column.generated,
        column.charset if type_name in _TEXT else None,
        column.length if type_name in ("char", "varchar") else None,
        (column.length, column.scale) if type_name == "decimal" else None,
        (column.length or 0) if type_name in ("time", "datetime", "timestamp") else None,
    )


def test_history_matches_information_schema(replayed: Replayed) -> None:
    """An independent check: information_schema, not the parser, reads the server's catalog."""
    history = replayed.history
    with replayed.conn.cursor() as cur:
        cur.execute(_CATALOG_COLUMNS, (DB, DB2))
        catalog: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        for row in cur.fetchall():
            (schema, table, name, data_type, column_type, nullable, extra) = row[:7]
            charset, char_length, precision, scale, fsp = row[7:]
            catalog.setdefault((schema, table), []).append(
                (
                    name,
                    data_type,
                    nullable == "YES",
                    "unsigned" in column_type,
                    "auto_increment" in extra,
                    "GENERATED" in extra,
                    charset,
                    char_length if data_type in ("char", "varchar") else None,
                    (precision, scale) if data_type == "decimal" else None,
                    fsp if data_type in ("time", "datetime", "timestamp") else None,
                )
            )
        cur.execute(_CATALOG_KEYS, (DB, DB2))
        keys: dict[tuple[str, str], dict[str, list[str]]] = {}
        for schema, table, index, column in cur.fetchall():
            keys.setdefault((schema, table), {}).setdefault(index, []).append(column)
    assert sorted(catalog) == sorted((t.database, t.name) for t in history.tables())
    for table in history.tables():
        key = (table.database, table.name)
        # information_schema hides the implicit system-versioning columns (binlog rows do not;
        # test_history_matches_binlog_rows checks those).
        columns = [c for c in table.columns if c not in _IMPLICIT_SYSTEM_COLUMNS]
        assert [_catalog_column(c, table) for c in columns] == catalog[key], key
        unique = dict(keys.get(key, {}))
        assert tuple(unique.pop("PRIMARY", ())) == table.primary_key, key
        assert {name: tuple(cols) for name, cols in unique.items()} == dict(table.unique_keys)


def test_history_spot_checks(replayed: Replayed) -> None:
    """A few exact values of the history state, so the comparisons above cannot pass vacuously."""
    history = replayed.history
    orders = history.table(DB2, "orders")
    assert orders is not None
    assert [c.name for c in orders.columns] == [
        "created_at",
        "id",
        "extra",
        "status",
        "code",
        "customer_name",
        "note",
        "total",
    ]
    assert orders.primary_key == ("id", "created_at")
    assert orders.unique_keys == (
        ("uq_created_id", ("created_at", "id")),
        ("uq_cust", ("customer_name", "code")),
        ("total", ("total",)),
    )
    swap_a = history.table(DB, "swap_a")
    assert swap_a is not None and [c.name for c in swap_a.columns] == ["b"]
    types = history.table(DB, "types")
    assert types is not None
    by_name = {c.name: c for c in types.columns}
    assert by_name["j"].type_name == by_name["j2"].type_name == "json"
    assert by_name["cbin"] == ColumnDef("cbin", "binary", length=4)
    assert by_name["id"] == ColumnDef(
        "id", "bigint", unsigned=True, nullable=False, auto_increment=True
    )
    cs = history.table(DB, "cs")
    assert cs is not None and cs.charset == "latin1"
    assert [(c.name, c.charset) for c in cs.columns] == [
        ("id", None),
        ("a", "utf8mb4"),
        ("b", "utf8mb4"),
        ("e", "utf8mb4"),
        ("z", None),
    ]


def test_timestamps_with_explicit_defaults_for_timestamp_off(replayed: Replayed) -> None:
    """MariaDB before 10.10 and MySQL 5.7 default to OFF: a TIMESTAMP is NOT NULL unless NULL."""
    sql = (
        "CREATE TABLE ts_off (a TIMESTAMP, b TIMESTAMP NULL, c TIMESTAMP(3) DEFAULT 0, "
        "d DATETIME, e TIMESTAMP NOT NULL DEFAULT 0)"
    )
    state = SchemaState(explicit_defaults_for_timestamp=False)
    state.apply(sql, DB)
    shown = SchemaState()
    with replayed.conn.cursor() as cur:
        cur.execute("SET SESSION explicit_defaults_for_timestamp = OFF")
        try:
            cur.execute(sql)
            cur.execute("SHOW CREATE TABLE ts_off")
            shown.apply(cur.fetchone()[1], DB)
        finally:
            cur.execute("DROP TABLE IF EXISTS ts_off")
            cur.execute("SET SESSION explicit_defaults_for_timestamp = DEFAULT")
    table = state.table(DB, "ts_off")
    assert table is not None
    assert [c.nullable for c in table.columns] == [False, True, False, True, False]
    assert table.columns == (shown.table(DB, "ts_off") or pytest.fail()).columns


# Rows for tables whose CHECK constraints or geometry columns refuse all-default values.
_ROWS = {
    "child": "(id) VALUES (1)",
    "types": "(pt) VALUES (POINT(0, 0))",
    "types_copy": "(pt) VALUES (POINT(0, 0))",
}


def test_history_matches_binlog_rows(replayed: Replayed, mariadb_conn: dict[str, Any]) -> None:
    """What the state is for: binlog rows carry exactly the state's columns, in its order.

    One row goes into every table; the binlog's table maps (``binlog_row_metadata=FULL`` names
    the columns) must list the columns of the state's definition, including columns that
    neither SHOW CREATE TABLE nor information_schema show.
    """
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import TableMapEvent

    history = replayed.history
    with replayed.conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        log_file, log_pos = cur.fetchone()[:2]
        # Non-strict: NOT NULL columns without a default take the type's implicit default.
        cur.execute("SET SESSION sql_mode = ''")
        try:
            for table in history.tables():
                row = _ROWS.get(table.name, "() VALUES ()")
                cur.execute(f"INSERT INTO `{table.database}`.`{table.name}` {row}")
        finally:
            cur.execute("SET SESSION sql_mode = DEFAULT")
    stream = BinLogStreamReader(
        connection_settings=dict(mariadb_conn),
        server_id=90_417,
        log_file=log_file,
        log_pos=log_pos,
        resume_stream=True,
        blocking=False,
        only_events=[TableMapEvent],
    )
    mapped: dict[tuple[str, str], list[str]] = {}
    try:
        for event in stream:
            names = event.optional_metadata.column_name_list
            mapped[(event.schema, event.table)] = list(names)
    finally:
        stream.close()
    assert sorted(mapped) == sorted((t.database, t.name) for t in history.tables())
    for table in history.tables():
        assert [c.name for c in table.columns] == mapped[(table.database, table.name)]
    sv = history.table(DB, "sv")
    assert sv is not None and [c.name for c in sv.columns] == [
        "id",
        "a",
        "c",
        "row_start",
        "row_end",
    ]
