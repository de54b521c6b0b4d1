#!/usr/bin/env bash
# Throwaway MariaDB 10.11 with a ROW binlog for CDC tests (recipe: shared/spec/test-servers.md §2).
# usage: scripts/mariadb_test_server.sh start|stop|restart DIR [PORT]
#   start  mariadb-install-db into DIR/data and start mariadbd on 127.0.0.1:PORT (default 53306)
#          with binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL; user root
#          with an empty password; prints "mariadbd pid N on 127.0.0.1:PORT".
#   stop   SIGTERM, wait for exit, remove DIR.
#   restart  SIGTERM, wait for exit, start mariadbd again on the same DIR and PORT (a server
#          restart under a running capture agent; the binlog moves to a new file).
set -euo pipefail
CMD=${1:?usage: $0 start|stop|restart DIR [PORT]}
DIR=${2:?usage: $0 start|stop|restart DIR [PORT]}
PORT=${3:-53306}
export PATH=$PATH:/usr/sbin:/usr/local/sbin # mariadbd lives in /usr/sbin
USEROPT=()
if [ "$(id -u)" = 0 ]; then USEROPT=(--user=mysql); fi # mariadbd refuses root unless --user=root

launch() {
  # Don't add --log-basename: it silently overrides the --log-bin name.
  setsid mariadbd --no-defaults "${USEROPT[@]}" --datadir="$DIR/data" \
    --port="$PORT" --bind-address=127.0.0.1 --socket="$DIR/mysqld.sock" --pid-file="$DIR/mysqld.pid" \
    --log-error="$DIR/error.log" --skip-name-resolve \
    --server-id=1 --log-bin=binlog --binlog-format=ROW --binlog-row-image=FULL \
    --binlog-row-metadata=FULL --innodb-buffer-pool-size=128M --innodb-flush-log-at-trx-commit=2 \
    </dev/null >/dev/null 2>&1 &
  for _ in $(seq 300); do
    if mariadb-admin --no-defaults -uroot -S "$DIR/mysqld.sock" ping >/dev/null 2>&1; then
      echo "mariadbd pid $(cat "$DIR/mysqld.pid") on 127.0.0.1:$PORT"
      return 0
    fi
    sleep 0.1
  done
  echo "mariadbd did not answer within 30 s; error log:" >&2
  cat "$DIR/error.log" >&2 2>/dev/null || true
  exit 1
}

halt() {
  if [ -f "$DIR/mysqld.pid" ]; then
    PID=$(cat "$DIR/mysqld.pid")
    kill -TERM "$PID" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  fi
}

case $CMD in
start)
  command -v mariadbd >/dev/null || { echo "no mariadbd: run 'make bootstrap'" >&2; exit 127; }
  mkdir -p "$DIR"
  if [ "$(id -u)" = 0 ]; then chown mysql:mysql "$DIR"; fi
  # --no-defaults keeps Debian's /etc/mysql config out; 'normal' auth gives root@127.0.0.1 an
  # empty password (the default would be unix_socket auth only).
  mariadb-install-db --no-defaults "${USEROPT[@]}" --datadir="$DIR/data" \
    --auth-root-authentication-method=normal --skip-test-db >"$DIR/install.log" 2>&1 ||
    { cat "$DIR/install.log" >&2; exit 1; }
  launch
  ;;
stop)
  halt
  rm -rf "$DIR"
  ;;
restart)
  halt
  launch
  ;;
*)
  echo "usage: $0 start|stop|restart DIR [PORT]" >&2
  exit 2
  ;;
esac
