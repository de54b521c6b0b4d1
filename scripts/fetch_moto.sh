#!/usr/bin/env bash
# Install moto's S3 server ONCE from PyPI into its own virtualenv, .cache/moto, for the tests of
# a lake on object storage (tests/fix_s3.py starts .cache/moto/bin/moto_server on a free port).
#
# A virtualenv of its own because moto needs boto3/botocore, and botocore pins
# python-dateutil<3 while the project's lock has python-dateutil 4: in .venv, `pip check` would
# fail. The server only talks HTTP to the tests, so it needs nothing from .venv.
#
# usage: scripts/fetch_moto.sh [--check]
# Environment: PYTHON (interpreter for the virtualenv; default .venv/bin/python's base),
#              MEDALLION_MOTO_DIR (default <repo>/.cache/moto; tests/fix_s3.py reads it too)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Resolved: a virtualenv's scripts name their interpreter by the path it was built at, so a path
# through a symlink (a worktree's .cache linked to another checkout's) must not end up in them.
MOTO_DIR=$(realpath -m "${MEDALLION_MOTO_DIR:-$ROOT/.cache/moto}")
MOTO_SPEC="moto[server]==5.2.5"
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
STAMP=$MOTO_DIR/.medallion-moto

log() { printf 'fetch_moto: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# In place: the stamp names this spec, and the server script's interpreter (its #! line) exists
# (a virtualenv moved or built through another path has a dangling one).
current() {
  [ -x "$MOTO_DIR/bin/moto_server" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$MOTO_SPEC" ] &&
    [ -x "$(head -n1 "$MOTO_DIR/bin/moto_server" | sed 's/^#!//')" ]
}
if current; then
  [ "${1:-}" = "--check" ] || log "up to date: $MOTO_SPEC in $MOTO_DIR"
  exit 0
fi
[ "${1:-}" = "--check" ] && { log "$MOTO_SPEC is not in $MOTO_DIR; run 'make bootstrap'"; exit 1; }
[ -x "$PYTHON" ] || die "no Python at $PYTHON"

# A virtualenv records its own path in its scripts, so it is built where it lives; the stamp is
# written last, so an interrupted install is redone.
log "installing $MOTO_SPEC into $MOTO_DIR (one time)"
rm -rf "$MOTO_DIR"
"$PYTHON" -m venv "$MOTO_DIR"
"$MOTO_DIR/bin/python" -m pip install --disable-pip-version-check --no-input -q "$MOTO_SPEC"
"$MOTO_DIR/bin/python" -m pip check --disable-pip-version-check >/dev/null ||
  { "$MOTO_DIR/bin/python" -m pip check >&2; die "pip check failed in the moto virtualenv"; }
echo "$MOTO_SPEC" >"$STAMP"
