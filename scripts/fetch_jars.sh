#!/usr/bin/env bash
# Fetch Delta Lake's jars for the installed PySpark ONCE from Maven Central into .cache/jars/, so
# that no Spark start ever needs the network (pipeline/spark.py puts these files on spark.jars;
# it never uses spark.jars.packages).
#
# usage: scripts/fetch_jars.sh [--check]
#   (no argument)  fetch unless the jar directory already matches its manifest (fast no-op)
#   --check        only verify the jar directory against its manifest; exit 1 if it does not match
#
# Environment:
#   PYTHON              interpreter that has pyspark installed (default: .venv/bin/python)
#   MEDALLION_JARS_DIR  where the jars go (default: <repo>/.cache/jars); pipeline/spark.py reads it too
#   DELTA_JAR_VERSION   Delta release to fetch (default below)
#
# What is fetched: io.delta:delta-spark_<spark major.minor>_2.13 and its runtime dependency
# closure, minus every artifact that PySpark already ships in pyspark/jars (Spark's own copy comes
# first on the classpath anyway, so a second copy would only waste space and confuse).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
JARS_DIR=${MEDALLION_JARS_DIR:-$ROOT/.cache/jars}
M2_REPO=${MEDALLION_M2_REPO:-$ROOT/.cache/m2}
# Delta publishes the Python package and the jars separately. delta-spark 4.4.1 exists on PyPI,
# but Maven Central only has io.delta:delta-spark_4.2_2.13 up to 4.4.0 (4.4.1 answers 404), so
# the jars are pinned to 4.4.0. The Python package is a thin py4j wrapper over these classes;
# keep the major.minor equal (checked below).
DELTA_JAR_VERSION=${DELTA_JAR_VERSION:-4.4.0}
SCALA_BINARY=2.13

log() { printf 'fetch_jars: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# shellcheck source=scripts/maven_jars.sh
. "$ROOT/scripts/maven_jars.sh"

[ -x "$PYTHON" ] || die "no Python at $PYTHON; run 'make bootstrap' (it creates .venv first)"
# Hadoop's S3A connector, for a lake on object storage (its own directory and manifest).
PYTHON="$PYTHON" bash "$ROOT/scripts/fetch_s3a_jars.sh" "$@"
read -r SPARK_VERSION SPARK_JARS PY_DELTA_VERSION < <("$PYTHON" - <<'PY'
import importlib.metadata as md
import os

import pyspark

print(pyspark.__version__, os.path.join(os.path.dirname(pyspark.__file__), "jars"),
      md.version("delta-spark"))
PY
)
SPARK_MINOR=$(cut -d. -f1,2 <<<"$SPARK_VERSION")
if [ "$(cut -d. -f1,2 <<<"$PY_DELTA_VERSION")" != "$(cut -d. -f1,2 <<<"$DELTA_JAR_VERSION")" ]; then
  die "Python delta-spark $PY_DELTA_VERSION and Delta jars $DELTA_JAR_VERSION differ in major.minor"
fi
ARTIFACT_ID=delta-spark_${SPARK_MINOR}_${SCALA_BINARY}
COORDS=io.delta:$ARTIFACT_ID:$DELTA_JAR_VERSION
KEY="$COORDS for pyspark $SPARK_VERSION"
exit_if_current "$@"

mkdir -p "$(dirname "$JARS_DIR")"
WORK=$(mktemp -d "$(dirname "$JARS_DIR")/.fetch-jars.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
resolve_jars "$WORK" io.delta "$ARTIFACT_ID" "$DELTA_JAR_VERSION"

# Verify: every jar is a readable zip, and the classes pipeline/spark.py configures are present.
"$PYTHON" - "$WORK/jars" "$ARTIFACT_ID-$DELTA_JAR_VERSION.jar" "delta-storage-$DELTA_JAR_VERSION.jar" <<'PY'
import pathlib
import sys
import zipfile

jars_dir, delta_jar, storage_jar = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
required = {
    delta_jar: ("io/delta/sql/DeltaSparkSessionExtension.class",
                "org/apache/spark/sql/delta/catalog/DeltaCatalog.class"),
    storage_jar: ("io/delta/storage/LogStore.class",),
}
jars = sorted(jars_dir.glob("*.jar"))
for jar in jars:
    with zipfile.ZipFile(jar) as zf:
        bad = zf.testzip()
        if bad is not None:
            sys.exit(f"corrupt entry {bad} in {jar.name}")
        missing = [c for c in required.get(jar.name, ()) if c not in zf.namelist()]
        if missing:
            sys.exit(f"{jar.name} lacks {missing}")
absent = sorted(set(required) - {j.name for j in jars})
if absent:
    sys.exit(f"missing jars: {absent}")
PY

install_jars "$WORK"
