#!/usr/bin/env bash
# Fetch the PostgreSQL JDBC driver ONCE from Maven Central into .cache/metastore-jars/, for the
# Hive metastore of `spark.catalog: hive` (pipeline/catalog.py). PySpark ships Spark's Hive 2.3.10
# client and DataNucleus; the only thing missing for a metastore in PostgreSQL is this driver.
#
# usage: scripts/fetch_metastore_jars.sh [--check]
#   (no argument)  fetch unless the jar is already there with the pinned checksum (fast no-op)
#   --check        only verify; exit 1 (naming `make bootstrap`) if the jar is missing or differs
#
# Environment:
#   MEDALLION_METASTORE_JARS_DIR  where the jar goes (default: <repo>/.cache/metastore-jars);
#                                 pipeline/catalog.py reads it too
#   MEDALLION_M2_REPO             Maven's local repository (default: <repo>/.cache/m2, shared with
#                                 scripts/fetch_jars.sh)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JARS_DIR=${MEDALLION_METASTORE_JARS_DIR:-$ROOT/.cache/metastore-jars}
M2_REPO=${MEDALLION_M2_REPO:-$ROOT/.cache/m2}
VERSION=42.7.11
JAR=postgresql-$VERSION.jar
# The sha256 of Maven Central's org.postgresql:postgresql:42.7.11 jar; Maven checks the .sha1 of
# the download as well (-C).
SHA256=1981b31d3993c58702783c1cddf10a34e48c1f413d70ff1cb6def0a143484647
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

log() { printf 'fetch_metastore_jars: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

present() {
  [ -f "$JARS_DIR/$JAR" ] && [ "$(sha256sum "$JARS_DIR/$JAR" | awk '{print $1}')" = "$SHA256" ]
}

if present; then
  exit 0
fi
[ "${1:-}" = "--check" ] && { log "$JARS_DIR/$JAR is missing or differs; run 'make bootstrap'"; exit 1; }

command -v mvn >/dev/null || die "mvn not found (Debian package 'maven')"
mkdir -p "$JARS_DIR" "$M2_REPO"
WORK=$(mktemp -d "$JARS_DIR/.fetch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
log "fetching org.postgresql:postgresql:$VERSION from Maven Central (one time)"
mvn -B -q -C -Dmaven.repo.local="$M2_REPO" "$DEPENDENCY_PLUGIN:copy" \
  -Dartifact="org.postgresql:postgresql:$VERSION:jar" -DoutputDirectory="$WORK" \
  >"$WORK/mvn.log" 2>&1 || { cat "$WORK/mvn.log" >&2; die "mvn dependency:copy failed"; }
[ "$(sha256sum "$WORK/$JAR" | awk '{print $1}')" = "$SHA256" ] || die "$JAR: sha256 differs from the pinned one"
mv "$WORK/$JAR" "$JARS_DIR/$JAR"
present || die "verification of $JARS_DIR/$JAR failed"
log "fetched $JAR into $JARS_DIR"
