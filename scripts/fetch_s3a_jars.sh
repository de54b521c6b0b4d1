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
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
MANIFEST_NAME=MANIFEST.sha256

log() { printf 'fetch_s3a_jars: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

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
MANIFEST=$JARS_DIR/$MANIFEST_NAME

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
WORK=$(mktemp -d "$(dirname "$JARS_DIR")/.fetch-s3a-jars.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.medallion</groupId>
  <artifactId>s3a-jars</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-aws</artifactId>
      <version>$HADOOP_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM

MVN=(mvn -B -q -C -f "$WORK/pom.xml" -Dmaven.repo.local="$M2_REPO")
log "resolving $COORDS from Maven Central (one time; the AWS SDK bundle is large)"
"${MVN[@]}" "$DEPENDENCY_PLUGIN:list" -DincludeScope=runtime -DoutputFile="$WORK/deps.txt" \
  >"$WORK/mvn-list.log" 2>&1 || { cat "$WORK/mvn-list.log" >&2; die "mvn dependency:list failed"; }
mapfile -t DEPS < <(grep -E '^ +[^ :]+:[^ :]+:jar:' "$WORK/deps.txt" | awk '{print $1}' | sort -u)
[ "${#DEPS[@]}" -gt 0 ] || die "no dependencies listed for $COORDS"
EXCLUDE=()
for dep in "${DEPS[@]}"; do
  aid=$(cut -d: -f2 <<<"$dep")
  if compgen -G "$SPARK_JARS/$aid-[0-9]*.jar" >/dev/null; then EXCLUDE+=("$aid"); fi
done
EXCLUDE_CSV=$(IFS=,; echo "${EXCLUDE[*]}")
log "Spark already ships: ${EXCLUDE_CSV:-nothing}"
"${MVN[@]}" "$DEPENDENCY_PLUGIN:copy-dependencies" -DincludeScope=runtime \
  -DexcludeArtifactIds="$EXCLUDE_CSV" -DoutputDirectory="$WORK/jars" \
  >"$WORK/mvn-copy.log" 2>&1 || { cat "$WORK/mvn-copy.log" >&2; die "mvn dependency:copy-dependencies failed"; }

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

{
  echo "# $KEY"
  (cd "$WORK/jars" && sha256sum -- *.jar)
} >"$WORK/jars/$MANIFEST_NAME"
rm -rf "$JARS_DIR.old"
[ -d "$JARS_DIR" ] && mv "$JARS_DIR" "$JARS_DIR.old"
mv "$WORK/jars" "$JARS_DIR"
rm -rf "$JARS_DIR.old"
manifest_matches || die "verification of $JARS_DIR failed after fetching"
log "fetched $(tail -n +2 "$MANIFEST" | wc -l) jars for $KEY into $JARS_DIR:"
tail -n +2 "$MANIFEST" | awk '{print "  " $2}' >&2
