#!/usr/bin/env bash
# Fetch Debezium Embedded ONCE from Maven Central and compile the tests' runner against it, so
# that no test ever needs the network (tests/fix_debezium.py starts the runner from these files).
#
# usage: scripts/fetch_debezium.sh [--check]
#   (no argument)  fetch + compile unless every runner is up to date (fast no-op)
#   --check        only verify; exit 1 (naming `make bootstrap`) if a runner is missing or stale
#
# Two runners, because the connectors need different Debezium cores (docs/debezium-embedded.md):
#   postgres  tests/debezium/postgres/pom.xml: Debezium 3.6.1.Final, PostgreSQL connector
#   mariadb   tests/debezium/mariadb/pom.xml:  Debezium 3.4.0.Final, MariaDB connector (the
#             newest that resolves; the MySQL connector 3.x refuses MariaDB 10.11)
# Each gets .cache/debezium/<name>/{lib/*.jar, classes/, STAMP}: the dependency closure of its
# pom, tests/debezium/src compiled with javac against it, and a stamp holding the hash of the pom,
# the sources, this script and the JDK. A runner whose stamp matches and whose jars match their
# sha256 manifest is left alone.
#
# Environment:
#   MEDALLION_DEBEZIUM_DIR  where the runners go (default: <repo>/.cache/debezium); the test
#                           fixture reads it too
#   MEDALLION_M2_REPO       Maven's local repository (default: <repo>/.cache/m2, shared with
#                           scripts/fetch_jars.sh)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DBZ_DIR=${MEDALLION_DEBEZIUM_DIR:-$ROOT/.cache/debezium}
M2_REPO=${MEDALLION_M2_REPO:-$ROOT/.cache/m2}
PROJECT=$ROOT/tests/debezium
RUNNERS=(postgres mariadb)
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
MAIN_CLASS=medallion/debezium/Runner.class

WORK=
trap 'if [ -n "$WORK" ]; then rm -rf "$WORK"; fi' EXIT

log() { printf 'fetch_debezium: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

CHECK=0
case "${1:-}" in
  "") ;;
  --check) CHECK=1 ;;
  *) die "unknown argument '$1' (usage: $0 [--check])" ;;
esac

for tool in java javac; do
  command -v "$tool" >/dev/null ||
    die "$tool not found: Debezium's runner needs a JDK 17 (Debian openjdk-17-jdk-headless); run 'make bootstrap'"
done

# The JDK's identity without starting a JVM (javac -version takes ~0.5 s): its release file.
JAVAC=$(readlink -f "$(command -v javac)")
JDK_VERSION="$JAVAC $(cat "$(dirname "$(dirname "$JAVAC")")/release" 2>/dev/null || true)"

# Everything the compiled runner depends on; a change in any of it rebuilds that runner.
runner_key() {
  local name=$1
  {
    echo "runner $name"
    echo "$JDK_VERSION"
    cat "$PROJECT/$name/pom.xml" "${BASH_SOURCE[0]}"
    find "$PROJECT/src" -type f -name '*.java' | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -d' ' -f1
}

up_to_date() {
  local name=$1 dir=$DBZ_DIR/$1
  [ -f "$dir/STAMP" ] && [ -f "$dir/classes/$MAIN_CLASS" ] && [ -f "$dir/lib/MANIFEST.sha256" ] ||
    return 1
  [ "$(cat "$dir/STAMP")" = "$(runner_key "$name")" ] || return 1
  local listed present
  listed=$(awk '{print $2}' "$dir/lib/MANIFEST.sha256" | sort)
  present=$(cd "$dir/lib" && ls -1 -- *.jar 2>/dev/null | sort)
  [ -n "$listed" ] && [ "$listed" = "$present" ] || return 1
  (cd "$dir/lib" && sha256sum --check --quiet --strict MANIFEST.sha256 >/dev/null 2>&1)
}

build() {
  local name=$1 dir=$DBZ_DIR/$1 work
  command -v mvn >/dev/null || die "mvn not found (Debian package 'maven'); run 'make bootstrap'"
  mkdir -p "$DBZ_DIR" "$M2_REPO"
  work=$(mktemp -d "$DBZ_DIR/.build-$name.XXXXXX")
  WORK=$work # removed on exit unless it was swapped in
  log "$name: resolving $(grep -m1 -o '<debezium.version>[^<]*' "$PROJECT/$name/pom.xml" |
    cut -d'>' -f2) from Maven Central (one time)"
  # -C: fail on a checksum mismatch instead of warning.
  mvn -B -q -C -f "$PROJECT/$name/pom.xml" -Dmaven.repo.local="$M2_REPO" \
    "$DEPENDENCY_PLUGIN:copy-dependencies" -DincludeScope=runtime -DoutputDirectory="$work/lib" \
    >"$work/mvn.log" 2>&1 || { cat "$work/mvn.log" >&2; die "$name: mvn copy-dependencies failed"; }
  (cd "$work/lib" && sha256sum -- *.jar >MANIFEST.sha256)
  log "$name: compiling the runner against $(grep -c . "$work/lib/MANIFEST.sha256") jars"
  javac -nowarn -encoding UTF-8 --release 17 -d "$work/classes" -cp "$work/lib/*" \
    $(find "$PROJECT/src" -type f -name '*.java' | LC_ALL=C sort) >"$work/javac.log" 2>&1 ||
    { cat "$work/javac.log" >&2; die "$name: javac failed"; }
  runner_key "$name" >"$work/STAMP"
  rm -f "$work/mvn.log" "$work/javac.log"
  # Swap the directory in whole: an interrupted build never leaves a half-filled runner.
  rm -rf "$dir.old"
  [ -d "$dir" ] && mv "$dir" "$dir.old"
  mv "$work" "$dir"
  rm -rf "$dir.old"
  up_to_date "$name" || die "$name: verification of $dir failed after building"
}

for name in "${RUNNERS[@]}"; do
  [ -f "$PROJECT/$name/pom.xml" ] || die "no $PROJECT/$name/pom.xml"
  if up_to_date "$name"; then
    [ "$CHECK" = 1 ] || log "$name: up to date ($DBZ_DIR/$name)"
    continue
  fi
  [ "$CHECK" = 1 ] && die "the Debezium runner '$name' in $DBZ_DIR is missing or stale; run 'make bootstrap'"
  t0=$SECONDS
  build "$name"
  log "$name: ready in $((SECONDS - t0)) s ($DBZ_DIR/$name)"
done
