"""Where a SparkSession keeps table names: in memory (the default) or in a Hive metastore.

With the default in-memory catalog every session starts empty and
:func:`pipeline.spark.build_spark_session` registers the lake's tables again; nothing outside the
process sees them. With ``spark.catalog: hive`` the names live in a Hive metastore whose database
is a PostgreSQL one (``spark.metastore.url``): ``silver.<table>`` are external Delta tables at
their paths and ``gold.<table>`` persistent views, so a fresh session, a notebook or another Spark
application configured with the same metastore sees and queries them without registering
anything.

Spark's built-in Hive 2.3.10 client and DataNucleus come with pyspark; the PostgreSQL JDBC driver
is fetched once by ``make bootstrap`` (``scripts/fetch_metastore_jars.sh``) into
``.cache/metastore-jars``. The metastore's tables are created by DataNucleus on first use
(``datanucleus.schema.autoCreateTables``), because pyspark does not ship Hive's ``schematool``
scripts; the first start against an empty database therefore takes longer. Its foreign keys and
unique indexes are not created (``autoCreateConstraints`` off, see :func:`hive_settings`: with
them the first ``CREATE TABLE`` hangs on a PostgreSQL lock), so the metastore relies on Hive's
own existence checks: let one pipeline write a lake's names. Two processes starting against a
fresh, empty metastore database at the same moment may race on the table creation: start one
first. A metastore whose schema was made by Hive's ``schematool`` (with its constraints) works
as it is. Derby, Hive's own default, is never used: a metastore URL is required.

The password (``spark.metastore.password``, from the environment or a ``.file`` like every
secret) never goes on the JVM's command line, where ``ps`` would show it: it is written into a
``hive-site.xml`` readable only by this user, in a private directory put on the driver's class
path, and removed when the process exits.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from xml.sax.saxutils import escape

from pydantic import SecretStr

from pipeline.errors import ConfigError, NotInstalledError

__all__ = [
    "HIVE_SITE",
    "METASTORE_JARS_DIR_ENV",
    "CatalogKind",
    "HiveMetastore",
    "default_metastore_jars_dir",
    "hive_settings",
    "metastore_jars",
]

METASTORE_JARS_DIR_ENV = "MEDALLION_METASTORE_JARS_DIR"
"""Environment variable naming the directory with the metastore's JDBC driver."""

HIVE_SITE = "hive-site.xml"
"""The file Spark's Hive client reads from the driver's class path."""

_REPO_ROOT = Path(__file__).resolve().parents[1]
_POSTGRES_URL = re.compile(r"^jdbc:postgresql://[^/?#]+/[^/?#]+(?:\?.*)?$")
_PASSWORD_IN_URL = re.compile(r"[?&]password=", re.IGNORECASE)
_POSTGRES_DRIVER = "org.postgresql.Driver"
_POSTGRES_JAR = re.compile(r"^postgresql-\d+\.\d+\.\d+\.jar$")


class CatalogKind(StrEnum):
    """The value of ``spark.catalog``."""

    IN_MEMORY = "in-memory"
    """Spark's in-memory catalog: names last as long as the session (the default)."""
    HIVE = "hive"
    """A Hive metastore in PostgreSQL (``spark.metastore.*``): names outlive every session."""


@dataclass(frozen=True, slots=True)
class HiveMetastore:
    """Where the Hive metastore's database is and who connects to it.

    Attributes:
        url: JDBC URL of the PostgreSQL database, ``jdbc:postgresql://host:port/dbname``; it must
            not hold the password.
        user: The database user.
        password: The user's password, if the server asks for one (masked in ``repr``).
    """

    url: str
    user: str
    password: SecretStr | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.url.startswith("jdbc:derby:"):
            raise ConfigError(
                "a Derby metastore admits one process at a time, which defeats a shared "
                "catalog; give a PostgreSQL database (jdbc:postgresql://host:port/dbname)",
                key_path="spark.metastore.url",
            )
        if not _POSTGRES_URL.match(self.url):
            raise ConfigError(
                f"expected jdbc:postgresql://host:port/dbname, got {self.url!r} (the metastore "
                "is supported in PostgreSQL only: its JDBC driver is the one make bootstrap "
                "fetches)",
                key_path="spark.metastore.url",
            )
        if _PASSWORD_IN_URL.search(self.url):
            raise ConfigError(
                "the URL holds a password; give it as spark.metastore.password (an environment "
                "variable or spark.metastore.password.file) instead",
                key_path="spark.metastore.url",
            )
        if not self.user:
            raise ConfigError("the metastore needs a user", key_path="spark.metastore.user")


def default_metastore_jars_dir() -> Path:
    """Return where the metastore's JDBC driver is expected.

    Returns:
        ``$MEDALLION_METASTORE_JARS_DIR`` if set, else ``<repo>/.cache/metastore-jars`` (filled
        by ``make bootstrap``).
    """
    configured = os.environ.get(METASTORE_JARS_DIR_ENV)
    return Path(configured) if configured else _REPO_ROOT / ".cache" / "metastore-jars"


def metastore_jars(jars_dir: Path | None = None) -> list[Path]:
    """The JDBC driver jar of the metastore's database.

    Args:
        jars_dir: Where to look; :func:`default_metastore_jars_dir` if None.

    Returns:
        The driver jar (one file).

    Raises:
        NotInstalledError: The directory holds no ``postgresql-<version>.jar``.
    """
    directory = Path(jars_dir) if jars_dir is not None else default_metastore_jars_dir()
    jars = sorted(directory.glob("postgresql-*.jar")) if directory.is_dir() else []
    found = [jar for jar in jars if _POSTGRES_JAR.match(jar.name)]
    if not found:
        raise NotInstalledError(
            f"the PostgreSQL JDBC driver of the Hive metastore is not in {directory}: run make "
            f"bootstrap (or point ${METASTORE_JARS_DIR_ENV} at a directory holding "
            "postgresql-<version>.jar)"
        )
    return found[-1:]


def hive_settings(metastore: HiveMetastore, *, jars_dir: Path | None = None) -> dict[str, str]:
    """Static Spark settings of a session whose catalog is the Hive metastore ``metastore``.

    The password, if any, goes into a private ``hive-site.xml`` (see the module docstring); the
    settings hold everything else and are safe to log.

    Args:
        metastore: The metastore's database.
        jars_dir: Directory with the JDBC driver; :func:`default_metastore_jars_dir` if None.

    Returns:
        Settings for the session builder, among them ``spark.driver.extraClassPath`` (the
        driver jar, and the private directory when there is a password): merge it with any
        other class path rather than replacing one with the other.

    Raises:
        NotInstalledError: The JDBC driver is missing.
    """
    classpath = [str(jar) for jar in metastore_jars(jars_dir)]
    if metastore.password is not None:
        classpath.append(str(_private_hive_site(metastore.password)))
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": metastore.url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": _POSTGRES_DRIVER,
        "spark.hadoop.javax.jdo.option.ConnectionUserName": metastore.user,
        # pyspark has no schematool scripts; DataNucleus creates the metastore's tables itself,
        # each on first use. Not its constraints: a foreign key added on first use of a table
        # (ALTER TABLE "TBL_PRIVS" ... REFERENCES "TBLS") runs on a second connection and waits
        # on PostgreSQL's lock of TBLS, held by the CREATE TABLE transaction that needs it: a
        # hang, never detected as a deadlock (seen on every first CREATE TABLE).
        "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
        "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
        "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
        "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.driver.extraClassPath": os.pathsep.join(classpath),
    }


def _private_hive_site(password: SecretStr) -> Path:
    directory = Path(tempfile.mkdtemp(prefix="medallion-metastore-"))  # mode 0700
    atexit.register(shutil.rmtree, directory, True)
    path = directory / HIVE_SITE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(
            '<?xml version="1.0"?>\n<configuration>\n  <property>\n'
            "    <name>javax.jdo.option.ConnectionPassword</name>\n"
            f"    <value>{escape(password.get_secret_value())}</value>\n"
            "  </property>\n</configuration>\n"
        )
    return directory
