#!/usr/bin/env bash
# Fetch an Apache Kafka broker (KRaft mode) ONCE from Maven Central into .cache/kafka/, so that
# the tests' broker (tests/fix_kafka.py) never needs the network.
#
# usage: scripts/fetch_kafka.sh [--check]
#   (no argument)  fetch unless the jar directory already matches its manifest (fast no-op)
#   --check        only verify the jar directory against its manifest; exit 1 if it does not match
#
# Environment:
#   MEDALLION_KAFKA_DIR  where the jars go (default: <repo>/.cache/kafka); tests/fix_kafka.py reads it
#   MEDALLION_M2_REPO    Maven's local repository (default: <repo>/.cache/m2, shared with
#                        scripts/fetch_jars.sh)
#   KAFKA_VERSION        Kafka release to fetch (default below)
#
# What is fetched: org.apache.kafka:kafka_2.13 (the broker, with kafka.Kafka and
# kafka.tools.StorageTool) and its runtime dependency closure, plus log4j-core and log4j's
# binding for Kafka's SLF4J 1.7, so that the fixture's log4j2 configuration decides what the
# broker logs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JARS_DIR=${MEDALLION_KAFKA_DIR:-$ROOT/.cache/kafka}
M2_REPO=${MEDALLION_M2_REPO:-$ROOT/.cache/m2}
KAFKA_VERSION=${KAFKA_VERSION:-4.1.1}
LOG4J_VERSION=2.24.3
SCALA_BINARY=2.13
KEY="org.apache.kafka:kafka_$SCALA_BINARY:$KAFKA_VERSION + log4j-core, log4j-slf4j-impl $LOG4J_VERSION"

log() { printf 'fetch_kafka: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# shellcheck source=scripts/maven_jars.sh
. "$ROOT/scripts/maven_jars.sh"

exit_if_current "${1:-}"

command -v mvn >/dev/null || die "mvn not found (Debian package 'maven')"
mkdir -p "$(dirname "$JARS_DIR")" "$M2_REPO"
WORK=$(mktemp -d "$(dirname "$JARS_DIR")/.fetch-kafka.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Not maven_jars.sh's resolve_jars: the broker runs in a JVM of its own, so nothing PySpark ships
# is left out, and it needs log4j beside the broker's own closure.
cat >"$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.medallion</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_$SCALA_BINARY</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM

# -C: fail on a checksum mismatch instead of warning (Maven verifies the .sha1 of every download).
log "resolving $KEY from Maven Central (one time)"
mvn -B -q -C -f "$WORK/pom.xml" -Dmaven.repo.local="$M2_REPO" \
  "$DEPENDENCY_PLUGIN:copy-dependencies" -DincludeScope=runtime -DoutputDirectory="$WORK/jars" \
  >"$WORK/mvn.log" 2>&1 || { cat "$WORK/mvn.log" >&2; die "mvn dependency:copy-dependencies failed"; }

# Verify: every jar is a readable zip, and the two classes the fixture starts are present.
python3 - "$WORK/jars" "kafka_$SCALA_BINARY-$KAFKA_VERSION.jar" <<'PY'
import pathlib
import sys
import zipfile

jars_dir, broker_jar = pathlib.Path(sys.argv[1]), sys.argv[2]
required = {broker_jar: ("kafka/Kafka.class", "kafka/tools/StorageTool.class")}
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
