#!/usr/bin/env bash
# Set up everything medallion needs on a Debian 12 machine, idempotently.
#
# usage: scripts/bootstrap.sh [all|system|venv|native|jars|debezium|kafka|lock]
#   system  Debian packages: PostgreSQL 15 (+ wal2json), MariaDB, chromium + chromedriver, gcc and
#           the Python headers (the native step), and
#           a JDK 17/Maven if missing.
#           The Debian services are NOT started: the tests start private instances.
#   venv    .venv with `pip install -e '.[dev,postgres,mysql,oracle]'`, pinned by requirements.lock.
#   native  the C extensions of setup.py (capture.mysql._rowdecode ...) built in place, again
#           whenever a .c file is newer than its built module (after a git pull, an edit).
#   jars    Delta's jars, fetched once from Maven Central into .cache/jars (scripts/fetch_jars.sh).
#   debezium  Debezium Embedded fetched once from Maven Central into .cache/debezium and the
#           tests' runner compiled against it (scripts/fetch_debezium.sh).
#   kafka   an Apache Kafka broker (KRaft) fetched once from Maven Central into .cache/kafka for
#           the tests' broker (scripts/fetch_kafka.sh).
#   all     the six above, in that order (default; what `make bootstrap` runs).
#   lock    regenerate requirements.lock from the current .venv (`make lock`).
#
# Each step first checks whether there is anything to do (installed packages, a stamp holding the
# hash of pyproject.toml + requirements.lock, the jar manifests, the runner's stamp), so a second
# run is a fast no-op.
# Environment: PYTHON (interpreter for a new .venv, default python3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV=$ROOT/.venv
LOCK=$ROOT/requirements.lock
VENV_STAMP=$VENV/.medallion-bootstrap
EXTRAS="dev,postgres,mysql,sqlserver,db2,oracle,mongodb,kafka"
PYTHON=${PYTHON:-python3}
PIP_FLAGS=(--disable-pip-version-check --no-input --progress-bar off)

log() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
elapsed() { echo "$((SECONDS - $1)) s"; }

# ---------------------------------------------------------------- system packages
# chromium + chromium-driver: the tests render the HTML quality report headless.
# unixodbc + tdsodbc: pyodbc's driver manager and FreeTDS's ODBC driver (the SQL Server agent).
APT_PACKAGES=(postgresql-15 postgresql-15-wal2json mariadb-server chromium chromium-driver
  unixodbc tdsodbc)
PG_BIN=/usr/lib/postgresql/15/bin

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

step_system() {
  local t0=$SECONDS missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do pkg_installed "$pkg" || missing+=("$pkg"); done
  command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
  # javac: the Debezium runner of the tests is compiled here (scripts/fetch_debezium.sh).
  command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null || missing+=(maven)
  if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then missing+=(python3-venv); fi
  # The native step compiles setup.py's C extensions against this interpreter's headers.
  command -v gcc >/dev/null || missing+=(gcc libc6-dev)
  if ! "$PYTHON" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null
  then missing+=(python3-dev); fi
  if [ "${#missing[@]}" -eq 0 ]; then
    log "system packages: present"
  else
    local sudo=()
    if [ "$(id -u)" != 0 ]; then
      command -v sudo >/dev/null || die "need root to apt-get install ${missing[*]}"
      sudo=(sudo)
    fi
    log "system packages: installing ${missing[*]}"
    # Debian's postinst scripts start services through invoke-rc.d unless policy-rc.d says no
    # (exit 101). Container images ship one; add a temporary one if this machine lacks it.
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
      "${sudo[@]}" chmod 755 "$policy"
      added_policy=1
    fi
    local rc=0
    {
      "${sudo[@]}" apt-get update -qq &&
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
          -o Dpkg::Use-Pty=0 "${missing[@]}" >/dev/null
    } || rc=$?
    if [ "$added_policy" = 1 ]; then "${sudo[@]}" rm -f "$policy"; fi
    [ "$rc" = 0 ] || die "apt-get install ${missing[*]} failed (exit $rc)"
    log "system packages: installed in $(elapsed "$t0")"
  fi
  local bin
  for bin in "$PG_BIN/initdb" "$PG_BIN/pg_ctl" /usr/lib/postgresql/15/lib/wal2json.so \
    /usr/sbin/mariadbd /usr/bin/mariadb-install-db /usr/bin/mariadb-admin /usr/bin/chromium \
    /usr/bin/chromedriver /usr/lib/x86_64-linux-gnu/libodbc.so.2 \
    /usr/lib/x86_64-linux-gnu/odbc/libtdsodbc.so; do
    [ -e "$bin" ] || die "$bin is missing after installing ${APT_PACKAGES[*]}"
  done
}

# ---------------------------------------------------------------- virtualenv
venv_key() {
  # Re-install whenever the declared or the locked dependencies change.
  { "$VENV/bin/python" -VV; cat pyproject.toml; [ -f "$LOCK" ] && cat "$LOCK"; } | sha256sum | cut -d' ' -f1
}

step_venv() {
  local t0=$SECONDS
  if ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
      die "$PYTHON is $("$PYTHON" -V 2>&1); medallion needs Python >= 3.11 (set PYTHON=...)"
    log "venv: creating $VENV with $("$PYTHON" -V 2>&1)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  if [ -f "$VENV_STAMP" ] && [ "$(cat "$VENV_STAMP")" = "$(venv_key)" ]; then
    log "venv: up to date"
    return
  fi
  local constraints=()
  if [ -f "$LOCK" ]; then
    constraints=(-c "$LOCK")
  else
    log "venv: WARNING: no requirements.lock; installing unpinned (then run 'make lock')"
  fi
  log "venv: pip install -e '.[$EXTRAS]' ${constraints[*]}"
  "$VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" -q "${constraints[@]}" -e ".[$EXTRAS]"
  "$VENV/bin/python" -m pip check --disable-pip-version-check >/dev/null ||
    { "$VENV/bin/python" -m pip check --disable-pip-version-check >&2; die "pip check failed"; }
  venv_key >"$VENV_STAMP"
  log "venv: ready in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- native extensions
# Each Extension of setup.py is built from the C file of its dotted name (setup.py: _extension).
native_stale() {
  local suffix src
  suffix=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  while IFS= read -r src; do
    [ -e "${src%.c}$suffix" ] && [ ! "$src" -nt "${src%.c}$suffix" ] || return 0
  done < <(find "$ROOT" -name '*.c' -not -path '*/.venv/*' -not -path '*/.cache/*' \
    -not -path "$ROOT/build/*" -not -path '*/node_modules/*')
  return 1
}

step_native() {
  local t0=$SECONDS
  [ -x "$VENV/bin/python" ] || die "no $VENV; run the venv step first"
  if ! native_stale; then
    log "native: up to date"
    return
  fi
  log "native: building the C extensions in place (setup.py build_ext --inplace)"
  PYTHONWARNINGS=ignore "$VENV/bin/python" setup.py -q build_ext --inplace >/dev/null ||
    die "building the C extensions failed (gcc and the Python headers are needed)"
  ! native_stale || die "the C extensions are still older than their sources after the build"
  log "native: built in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- jars
step_jars() {
  local t0=$SECONDS
  PYTHON="$VENV/bin/python" bash "$ROOT/scripts/fetch_jars.sh"
  PYTHON="$VENV/bin/python" bash "$ROOT/scripts/fetch_moto.sh"  # the object-store tests' S3 server
  bash "$ROOT/scripts/fetch_metastore_jars.sh"  # PostgreSQL JDBC for spark.catalog: hive
  [ $((SECONDS - t0)) -lt 2 ] || log "jars: ready in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- debezium
step_debezium() {
  local t0=$SECONDS
  bash "$ROOT/scripts/fetch_debezium.sh"
  [ $((SECONDS - t0)) -lt 2 ] || log "debezium: ready in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- kafka
step_kafka() {
  local t0=$SECONDS
  bash "$ROOT/scripts/fetch_kafka.sh"
  [ $((SECONDS - t0)) -lt 2 ] || log "kafka: ready in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- lock
step_lock() {
  [ -x "$VENV/bin/python" ] || die "no $VENV; run 'make bootstrap' first"
  {
    echo "# Pinned versions for pip (used as constraints by scripts/bootstrap.sh)."
    echo "# Generated from .venv by 'make lock' (pip freeze --exclude-editable); do not edit."
    "$VENV/bin/python" -m pip freeze --disable-pip-version-check --exclude-editable
  } >"$LOCK.tmp"
  mv "$LOCK.tmp" "$LOCK"
  venv_key >"$VENV_STAMP" # .venv is exactly what the new lock pins
  log "wrote $LOCK ($(grep -vc '^#' "$LOCK") packages)"
}

case "${1:-all}" in
  system) step_system ;;
  venv) step_venv ;;
  native) step_native ;;
  jars) step_jars ;;
  debezium) step_debezium ;;
  kafka) step_kafka ;;
  all)
    T0=$SECONDS
    step_system
    step_venv
    step_native
    step_jars
    step_debezium
    step_kafka
    log "done in $(elapsed "$T0")"
    ;;
  lock) step_lock ;;
  *) die "unknown step '$1' (all|system|venv|native|jars|debezium|kafka|lock)" ;;
esac
