#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the tests (and CI): idempotent, one command.
#
#   eval "$(bash scripts/postgres.sh)"        # start (or reuse) it; exports HARNESSRL_TEST_POSTGRES_URL
#   bash scripts/postgres.sh start >/dev/null; . "${HARNESSRL_PG_DIR:-/tmp/harnessrl-pg}/env"   # same
#   bash scripts/postgres.sh stop             # stop it (the data folder is kept; `reset` removes it)
#   bash scripts/postgres.sh status           # exit 0 when it runs
#
# Installs Debian's `postgresql` package when no server binaries are found (apt-get update once), then
# runs its own cluster in $HARNESSRL_PG_DIR (default /tmp/harnessrl-pg) as the `postgres` user when
# started as root (initdb refuses root), on 127.0.0.1:$HARNESSRL_PG_PORT (default: the port it already
# has, else 54329 when free, else any free port), with trust auth on loopback only and fsync off: a
# test server, never a place for data you want to keep. stdout carries only `export ...` lines (also
# written to $HARNESSRL_PG_DIR/env); progress goes to stderr.
set -euo pipefail

DIR="${HARNESSRL_PG_DIR:-/tmp/harnessrl-pg}"
DB="${HARNESSRL_PG_DB:-harnessrl}"
DATA="$DIR/data"
say() { echo "postgres.sh: $*" >&2; }

find_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { echo "$d"; return 0; }
  done
  command -v pg_ctl >/dev/null 2>&1 && { dirname "$(readlink -f "$(command -v pg_ctl)")"; return 0; }
  return 1
}

install_postgres() {
  [ "$(id -u)" -eq 0 ] || { say "PostgreSQL is not installed and I am not root: apt-get install postgresql"; exit 1; }
  say "installing Debian's postgresql package"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
}

# Run a server binary as the cluster's owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 - "$1" <<'EOF'
import socket, sys
want = int(sys.argv[1])
for port in (want, 0):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: TIME_WAIT is fine
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(s.getsockname()[1])
        break
EOF
}

running_port() {  # the port of the server running on $DATA, or nothing
  as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1 || return 0
  sed -n 4p "$DATA/postmaster.pid"
}

write_env() {
  local url="postgresql://postgres@127.0.0.1:$1/$DB"
  printf 'export HARNESSRL_TEST_POSTGRES_URL=%s\n' "$url" | tee "$DIR/env"
}

start() {
  mkdir -p "$DIR"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$DIR"; chmod 755 "$DIR"; fi
  if [ ! -s "$DATA/PG_VERSION" ]; then
    say "initializing a cluster in $DATA"
    as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
  fi
  local port; port="$(running_port)"
  if [ -z "$port" ]; then
    port="$(free_port "${HARNESSRL_PG_PORT:-54329}")"
    say "starting on 127.0.0.1:$port"
    as_owner "$BIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 start -o \
      "-c listen_addresses=127.0.0.1 -p $port -k $DIR -c fsync=off -c full_page_writes=off \
       -c synchronous_commit=on -c max_connections=300" >/dev/null \
      || { tail -20 "$DIR/server.log" >&2; exit 1; }
  else
    say "already running on 127.0.0.1:$port"
  fi
  local psql=("$BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtAX)
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != "1" ]; then
    say "creating database $DB"
    "${psql[@]}" -c "CREATE DATABASE \"$DB\"" >/dev/null
  fi
  write_env "$port"
}

BIN="$(find_bindir || true)"
if [ -z "$BIN" ] && [ "${1:-start}" = "start" ]; then install_postgres; BIN="$(find_bindir)"; fi

case "${1:-start}" in
  start) start ;;
  env) [ -s "$DIR/env" ] && cat "$DIR/env" ;;
  status) [ -n "$BIN" ] && [ -n "$(running_port)" ] ;;
  stop) [ -z "$BIN" ] || [ ! -d "$DATA" ] || as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true ;;
  reset) bash "$0" stop; rm -rf "$DIR" ;;
  *) say "usage: $0 [start|env|status|stop|reset]"; exit 2 ;;
esac
