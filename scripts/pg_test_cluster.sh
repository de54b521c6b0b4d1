#!/usr/bin/env bash
# Throwaway PostgreSQL 15 cluster for CDC tests (recipe: shared/spec/test-servers.md §1).
# usage: scripts/pg_test_cluster.sh start|stop DIR [PORT]
#   start  initdb into DIR/data, wal_level=logical, listen on 127.0.0.1:PORT (default 55432),
#          socket in DIR; prints "postgres pid N on 127.0.0.1:PORT". DIR must be reachable by the
#          'postgres' user when run as root (a mktemp -d under /tmp is; pytest's tmp dirs are not).
#   stop   fast shutdown, then remove DIR.
set -euo pipefail
CMD=${1:?usage: $0 start|stop DIR [PORT]}
DIR=${2:?usage: $0 start|stop DIR [PORT]}
PORT=${3:-55432}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
# initdb/postgres refuse to run as root: run them as the 'postgres' system user when we are root.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case $CMD in
start)
  [ -x "$PGBIN/initdb" ] || { echo "no $PGBIN/initdb: run 'make bootstrap'" >&2; exit 127; }
  mkdir -p "$DIR"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$DIR"; fi
  as_pg "$PGBIN/initdb" -D "$DIR/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync \
    >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; exit 1; }
  # Members of the role 'medallion_password' must give their password (tests of wrong
  # passwords and of secrets in messages); everyone else keeps trust.
  { echo "host all +medallion_password 127.0.0.1/32 scram-sha-256"; cat "$DIR/data/pg_hba.conf"; } \
    >"$DIR/data/pg_hba.conf.new" && mv "$DIR/data/pg_hba.conf.new" "$DIR/data/pg_hba.conf"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$DIR/data/pg_hba.conf"; fi
  cat >>"$DIR/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
fsync = off                 # test speed only; fine for throwaway clusters
full_page_writes = off
shared_buffers = 64MB
# do NOT set synchronous_commit=off: logical decoding only returns WAL that is flushed,
# so a peek right after an async commit can come back empty.
CONF
  as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 30 start >/dev/null ||
    { cat "$DIR/server.log" >&2; exit 1; }
  echo "postgres pid $(head -1 "$DIR/data/postmaster.pid") on 127.0.0.1:$PORT"
  ;;
stop)
  if [ -f "$DIR/data/postmaster.pid" ]; then
    as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m fast -w -t 30 stop >/dev/null ||
      as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null || true
  fi
  rm -rf "$DIR"
  ;;
*)
  echo "usage: $0 start|stop DIR [PORT]" >&2
  exit 2
  ;;
esac
