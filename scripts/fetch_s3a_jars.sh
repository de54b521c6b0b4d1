#!/usr/bin/env bash
# Fetch Hadoop's S3A connector (hadoop-aws, matching PySpark's hadoop-client, and its AWS SDK
# bundle) ONCE from Maven Central into .cache/s3a-jars/. pipeline/spark_storage.py puts these jars
# on spark.jars only when the lake root is an s3:// URI; a local lake never loads them (the SDK
# bundle is large). Called by scripts/fetch_jars.sh.
#
# usage: scripts/fetch_s3a_jars.sh [--check]
#   (no argument)  fetch unless the directory already matches its manifest (fast no-op)
#   --check        only verify the directory against its manifest; exit 1 if it does not match
#
# Environment:
#   PYTHON                 interpreter that has pyspark installed (default: .venv/bin/python)
#   MEDALLION_S3A_JARS_DIR where the jars go (default: <repo>/.cache/s3a-jars); read by
#                          pipeline/spark_storage.py too
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
JARS_DIR=${MEDALLION_S3A_JARS_DIR:-$ROOT/.cache/s3a-jars}
M2_REPO=${MEDALLION_M2_REPO:-$ROOT/.cache/m2}

log() { printf 'fetch_s3a_jars: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# shellcheck source=scripts/maven_jars.sh
. "$ROOT/scripts/maven_jars.sh"

[ -x "$PYTHON" ] || die "no Python at $PYTHON; run 'make bootstrap' (it creates .venv first)"
SPARK_JARS=$("$PYTHON" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
# hadoop-aws must be the exact version of the hadoop-client Spark ships (S3A calls into its
# internals); read it from the jar's name rather than pinning it here.
HADOOP_JAR=$(cd "$SPARK_JARS" && ls -1 hadoop-client-api-*.jar 2>/dev/null | head -n1)
[ -n "$HADOOP_JAR" ] || die "no hadoop-client-api-*.jar in $SPARK_JARS"
HADOOP_VERSION=${HADOOP_JAR#hadoop-client-api-}
HADOOP_VERSION=${HADOOP_VERSION%.jar}
COORDS=org.apache.hadoop:hadoop-aws:$HADOOP_VERSION
KEY="$COORDS for $HADOOP_JAR"
exit_if_current "$@"

mkdir -p "$(dirname "$JARS_DIR")"
WORK=$(mktemp -d "$(dirname "$JARS_DIR")/.fetch-s3a-jars.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
resolve_jars "$WORK" org.apache.hadoop hadoop-aws "$HADOOP_VERSION"

"$PYTHON" - "$WORK/jars" "hadoop-aws-$HADOOP_VERSION.jar" <<'PY'
import pathlib
import sys
import zipfile

jars_dir, aws_jar = pathlib.Path(sys.argv[1]), sys.argv[2]
jars = sorted(jars_dir.glob("*.jar"))
for jar in jars:
    with zipfile.ZipFile(jar) as zf:
        names = set(zf.namelist())
        if jar.name == aws_jar and "org/apache/hadoop/fs/s3a/S3AFileSystem.class" not in names:
            sys.exit(f"{jar.name} lacks S3AFileSystem")
if aws_jar not in {j.name for j in jars}:
    sys.exit(f"missing {aws_jar}")
if not any(j.name.startswith("bundle-") for j in jars):
    sys.exit("missing the AWS SDK bundle (software.amazon.awssdk:bundle)")
PY

install_jars "$WORK"
