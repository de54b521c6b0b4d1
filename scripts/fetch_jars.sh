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
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
MANIFEST_NAME=MANIFEST.sha256

log() { printf 'fetch_jars: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

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
MANIFEST=$JARS_DIR/$MANIFEST_NAME

# The manifest's first line names what was fetched; the rest are `sha256sum` lines of every jar.
manifest_matches() {
  [ -f "$MANIFEST" ] || return 1
  [ "$(head -n1 "$MANIFEST")" = "# $KEY" ] || return 1
  local listed present
  listed=$(tail -n +2 "$MANIFEST" | awk '{print $2}' | sort)
  present=$(cd "$JARS_DIR" && ls -1 -- *.jar 2>/dev/null | sort)
  [ -n "$listed" ] && [ "$listed" = "$present" ] || return 1
  (cd "$JARS_DIR" && tail -n +2 "$MANIFEST" | sha256sum --check --quiet --strict >/dev/null 2>&1)
}

if manifest_matches; then
  [ "${1:-}" = "--check" ] || log "up to date: $KEY ($(tail -n +2 "$MANIFEST" | wc -l) jars in $JARS_DIR)"
  exit 0
fi
[ "${1:-}" = "--check" ] && { log "jars in $JARS_DIR do not match $KEY; run 'make bootstrap'"; exit 1; }

command -v mvn >/dev/null || die "mvn not found (Debian package 'maven')"
mkdir -p "$(dirname "$JARS_DIR")" "$M2_REPO"
WORK=$(mktemp -d "$(dirname "$JARS_DIR")/.fetch-jars.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.medallion</groupId>
  <artifactId>delta-jars</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.delta</groupId>
      <artifactId>$ARTIFACT_ID</artifactId>
      <version>$DELTA_JAR_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM

# -C: fail on a checksum mismatch instead of warning (Maven verifies the .sha1 of every download).
MVN=(mvn -B -q -C -f "$WORK/pom.xml" -Dmaven.repo.local="$M2_REPO")
log "resolving $COORDS from Maven Central (one time)"
"${MVN[@]}" "$DEPENDENCY_PLUGIN:list" -DincludeScope=runtime -DoutputFile="$WORK/deps.txt" \
  >"$WORK/mvn-list.log" 2>&1 || { cat "$WORK/mvn-list.log" >&2; die "mvn dependency:list failed"; }

# deps.txt lines look like "   group:artifact:jar:version:scope" (newer plugins append " -- module ...").
mapfile -t DEPS < <(grep -E '^ +[^ :]+:[^ :]+:jar:' "$WORK/deps.txt" | awk '{print $1}' | sort -u)
[ "${#DEPS[@]}" -gt 0 ] || die "no dependencies listed for $COORDS"
EXCLUDE=()
for dep in "${DEPS[@]}"; do
  aid=$(cut -d: -f2 <<<"$dep")
  if compgen -G "$SPARK_JARS/$aid-[0-9]*.jar" >/dev/null; then EXCLUDE+=("$aid"); fi
done
EXCLUDE_CSV=$(IFS=,; echo "${EXCLUDE[*]}")
log "Spark $SPARK_VERSION already ships: ${EXCLUDE_CSV:-nothing}"

"${MVN[@]}" "$DEPENDENCY_PLUGIN:copy-dependencies" -DincludeScope=runtime \
  -DexcludeArtifactIds="$EXCLUDE_CSV" -DoutputDirectory="$WORK/jars" \
  >"$WORK/mvn-copy.log" 2>&1 || { cat "$WORK/mvn-copy.log" >&2; die "mvn dependency:copy-dependencies failed"; }

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

{
  echo "# $KEY"
  (cd "$WORK/jars" && sha256sum -- *.jar)
} >"$WORK/jars/$MANIFEST_NAME"

# Swap the directory in whole, so an interrupted fetch never leaves a half-filled jar directory.
rm -rf "$JARS_DIR.old"
[ -d "$JARS_DIR" ] && mv "$JARS_DIR" "$JARS_DIR.old"
mv "$WORK/jars" "$JARS_DIR"
rm -rf "$JARS_DIR.old"
manifest_matches || die "verification of $JARS_DIR failed after fetching"
log "fetched $(tail -n +2 "$MANIFEST" | wc -l) jars for $KEY into $JARS_DIR:"
tail -n +2 "$MANIFEST" | awk '{print "  " $2}' >&2
