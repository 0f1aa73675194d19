#!/usr/bin/env bash
# Install (if missing) and start the services memstream's tests and benchmarks
# use, all on 127.0.0.1, without systemd or Docker:
#
#   MariaDB  :3306  Debian's mariadb-server; root over TCP with an empty password,
#                   database `memstream` (utf8mb4)
#   MariaDB replica :3307  a second mariadbd (data under var/mariadb-replica)
#                   replicating from :3306 (GTID), for MEMSTREAM_DATABASE_READ_URL's tests;
#                   the primary writes a binary log (server-id 1) for it
#   Redis    :6379  Debian's redis-server, no persistence
#   Redis Cluster :7000-7002  three masters of one cluster (no replicas, no
#                   persistence), for the tests of MEMSTREAM_REDIS_CLUSTER
#   Kafka    :9092  Apache Kafka 3.9.1, KRaft, one combined broker+controller
#                   (controller on :9093), jars from Maven (scripts/kafka/pom.xml)
#
# Usage: bash scripts/services.sh up|down|env|status
#   up      install what is missing, start what is not answering, print the env
#   down    stop what `up` started (pid files); leaves anything else alone
#   env     print the `export MEMSTREAM_...=...` lines for these services
#   status  say which services answer
#
# Progress goes to stderr and the export lines to stdout, so
#   eval "$(bash scripts/services.sh up)"
# works. State (Kafka jars and data, Redis dir, logs, pid files) lives under
# ${MEMSTREAM_SERVICES_DIR:-<repo>/var}; MariaDB keeps Debian's own data
# directory (/var/lib/mysql) and log (/var/log/mysql/error.log).
#
# A service whose MEMSTREAM_* variable points somewhere other than the default
# below is someone else's: it is neither installed nor started here.
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_CONF_DIR="$REPO_DIR/scripts/kafka"

# The project's defaults (memstream/settings.py): what this script provides.
DEFAULT_KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:9092"
DEFAULT_DATABASE_URL="mysql+aiomysql://root@127.0.0.1:3306/memstream"
DEFAULT_REDIS_URL="redis://127.0.0.1:6379/0"
DEFAULT_REPLICA_URL="mysql+aiomysql://root@127.0.0.1:3307/memstream"
DEFAULT_REDIS_CLUSTER_URL="redis://127.0.0.1:7000/0"

HOST=127.0.0.1
MARIADB_PORT=3306
REPLICA_PORT=3307
REPLICATION_USER=memstream_replication
REDIS_PORT=6379
REDIS_CLUSTER_PORTS=(7000 7001 7002)
KAFKA_PORT=9092
KAFKA_CONTROLLER_PORT=9093
DATABASE_NAME=memstream

# How long to wait for each service to answer after starting it.
MARIADB_START_TIMEOUT=${MEMSTREAM_MARIADB_START_TIMEOUT:-90}
REDIS_START_TIMEOUT=${MEMSTREAM_REDIS_START_TIMEOUT:-20}
KAFKA_START_TIMEOUT=${MEMSTREAM_KAFKA_START_TIMEOUT:-120}
# Modest heap: the machine has 2 cores and the tests run beside the broker.
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g}

STATE_DIR="${MEMSTREAM_SERVICES_DIR:-$REPO_DIR/var}"
mkdir -p "$STATE_DIR"
STATE_DIR="$(cd "$STATE_DIR" && pwd)" # absolute: the JVM and redis get these paths
RUN_DIR="$STATE_DIR/run"
LOG_DIR="$STATE_DIR/log"
KAFKA_DIR="$STATE_DIR/kafka"
KAFKA_LIBS="$KAFKA_DIR/libs"
KAFKA_DATA="$KAFKA_DIR/data"
KAFKA_PROPERTIES="$KAFKA_DIR/server.properties"
KAFKA_LOG="$LOG_DIR/kafka.log"
REDIS_LOG="$LOG_DIR/redis.log"
MARIADB_LOG=/var/log/mysql/error.log
MARIADB_SOCKET_DIR=/run/mysqld

log() { printf '[services] %s\n' "$*" >&2; }
die() {
    printf '[services] ERROR: %s\n' "$*" >&2
    exit 1
}

# ---------------------------------------------------------------- helpers

# Root is needed for apt-get and to start mysqld_safe (it drops to user mysql).
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

# True when something accepts TCP connections on 127.0.0.1:$1 (bash's /dev/tcp,
# so no netcat is needed; timeout guards against a filtered port).
port_open() {
    timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null
}

# Packages to install are collected first so that apt-get runs (and its
# `update`, the slow part) at most once per `up`.
APT_PACKAGES=()
need_command() { # need_command COMMAND DEBIAN-PACKAGE
    command -v "$1" >/dev/null || APT_PACKAGES+=("$2")
}
apt_install_needed() {
    ((${#APT_PACKAGES[@]})) || return 0
    log "installing with apt-get: ${APT_PACKAGES[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${APT_PACKAGES[@]}" >/dev/null
    APT_PACKAGES=()
}

# A service is ours to run only while its MEMSTREAM_* variable is unset, empty or
# the default. wanted VAR DEFAULT
wanted() {
    local value="${!1:-}"
    [[ -z $value || $value == "$2" ]]
}

# pid_alive PIDFILE [PATTERN]: the pid in PIDFILE is running (and its command line
# matches PATTERN, so that a reused pid is never taken for our process).
pid_alive() {
    local pid
    [[ -f $1 ]] || return 1
    pid="$(cat "$1")"
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    [[ -z ${2:-} ]] || tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}

# stop_pid NAME PIDFILE PATTERN: SIGTERM, wait up to 60 s (Kafka's controlled
# shutdown takes a few seconds), then SIGKILL.
stop_pid() {
    local name=$1 pidfile=$2 pattern=$3 pid i
    if ! pid_alive "$pidfile" "$pattern"; then
        rm -f "$pidfile"
        return 0
    fi
    pid="$(cat "$pidfile")"
    log "stopping $name (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 600; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name did not stop in 60 s: killing it"
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

# ---------------------------------------------------------------- MariaDB

mariadb_wanted() { wanted MEMSTREAM_DATABASE_URL "$DEFAULT_DATABASE_URL"; }

# The account the project's URL uses works: root, empty password, over TCP.
mariadb_tcp_ok() {
    mariadb --protocol=tcp -h "$HOST" -P "$MARIADB_PORT" -uroot --connect-timeout=3 \
        -e "USE \`$DATABASE_NAME\`" >/dev/null 2>&1
}

mariadb_start() {
    # Debian's package creates the data directory; a --no-triggers install or a
    # wiped /var/lib/mysql would not have one.
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        log "initialising /var/lib/mysql"
        as_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    fi
    # /run is a tmpfs: on a machine booted without systemd nothing creates these.
    as_root install -d -m 755 -o mysql -g root "$MARIADB_SOCKET_DIR"
    as_root install -d -m 2750 -o mysql -g adm /var/log/mysql

    # mysqld_safe rather than `service mariadb start`: the init script waits for
    # and then runs /etc/mysql/debian-start (mysql_upgrade, table checks), which
    # is slow and not needed. Debian's config sends mysqld_safe's log to syslog,
    # which a container lacks, hence --skip-syslog and a log file. setsid takes
    # it out of our process group so that it outlives this shell and `make`.
    log "starting MariaDB (mysqld_safe, log $MARIADB_LOG)"
    # A binary log and a server id of its own: the read replica (below) replicates from it.
    # The buffer pool (MEMSTREAM_MARIADB_BUFFER_POOL, default 1G) is what the platform
    # benchmark's tables need in memory; the tests use a fraction of it.
    as_root setsid mysqld_safe --skip-syslog --log-error="$MARIADB_LOG" \
        --bind-address="$HOST" --port="$MARIADB_PORT" \
        --server-id=1 --log-bin=mariadb-bin --binlog-format=ROW \
        --innodb-buffer-pool-size="${MEMSTREAM_MARIADB_BUFFER_POOL:-1G}" \
        </dev/null >/dev/null 2>&1 9>&- &
    # Remember that we started it, for `down`.
    echo "mysqld_safe" >"$RUN_DIR/mariadb.started"

    local deadline=$((SECONDS + MARIADB_START_TIMEOUT))
    # `mariadb-admin ping` succeeds as soon as the server answers, even when the
    # login itself is refused.
    until mariadb-admin --protocol=tcp -h "$HOST" -P "$MARIADB_PORT" -uroot \
        --connect-timeout=2 ping >/dev/null 2>&1; do
        ((SECONDS < deadline)) ||
            die "MariaDB did not answer on $HOST:$MARIADB_PORT within ${MARIADB_START_TIMEOUT}s; see $MARIADB_LOG"
        sleep 0.5
    done
}

# Debian's root@localhost logs in only through the unix socket (unix_socket
# plugin) with an invalid password, so TCP logins are refused. Allow the empty
# password as well, keep socket login for the OS root (Debian's maintenance
# scripts use it), and add root@127.0.0.1 / root@::1 so that the login works
# whether or not the server resolves 127.0.0.1 to "localhost". Every statement
# is idempotent.
mariadb_configure() {
    mariadb_tcp_ok && return 0
    log "MariaDB: allowing root over TCP with an empty password, creating database $DATABASE_NAME"
    if ! as_root mariadb --protocol=socket -uroot <<SQL; then
ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'root'@'::1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'::1' WITH GRANT OPTION;
FLUSH PRIVILEGES;
CREATE DATABASE IF NOT EXISTS \`$DATABASE_NAME\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
SQL
        die "could not configure MariaDB as root over its unix socket (is the server on :$MARIADB_PORT this machine's mariadb-server?)"
    fi
    mariadb_tcp_ok || die "root still cannot log in over TCP to $HOST:$MARIADB_PORT; see $MARIADB_LOG"
}

mariadb_up() {
    if ! mariadb_wanted; then
        log "MariaDB: skipped, MEMSTREAM_DATABASE_URL points elsewhere"
        return 0
    fi
    if port_open "$MARIADB_PORT"; then
        log "MariaDB: already answering on $HOST:$MARIADB_PORT"
        mariadb_configure
        # Started before it wrote a binary log (by an older version of this script): once,
        # restart it with one, since the replica needs it.
        if [[ "$(mariadb_sql "SELECT @@log_bin")" != 1 && -f $RUN_DIR/mariadb.started ]]; then
            log "MariaDB: restarting it with a binary log, for the read replica"
            mariadb_down
            local deadline=$((SECONDS + MARIADB_START_TIMEOUT))
            while port_open "$MARIADB_PORT"; do
                ((SECONDS < deadline)) || die "MariaDB did not stop within ${MARIADB_START_TIMEOUT}s"
                sleep 0.5
            done
            mariadb_start
        fi
    else
        mariadb_start
    fi
    mariadb_configure
    log "MariaDB: ready on $HOST:$MARIADB_PORT"
}

mariadb_down() {
    [[ -f $RUN_DIR/mariadb.started ]] || return 0
    if port_open "$MARIADB_PORT"; then
        log "stopping MariaDB"
        # A clean shutdown over the socket (root via unix_socket); mysqld_safe
        # exits by itself after a normal shutdown instead of restarting mysqld.
        as_root mariadb-admin --protocol=socket -uroot shutdown ||
            log "mariadb-admin shutdown failed; MariaDB may still be running"
    fi
    rm -f "$RUN_DIR/mariadb.started"
}

mariadb_sql() { # mariadb_sql SQL: run on the primary as root over TCP, print the bare answer
    mariadb --protocol=tcp -h "$HOST" -P "$MARIADB_PORT" -uroot -N -B -e "$1" 2>/dev/null
}

# ---------------------------------------------------------------- MariaDB replica

REPLICA_DIR="$STATE_DIR/mariadb-replica"
REPLICA_SOCKET="$REPLICA_DIR/run/mysqld.sock"
REPLICA_LOG="$REPLICA_DIR/log/error.log"

replica_wanted() {
    mariadb_wanted && wanted MEMSTREAM_TEST_DATABASE_READ_URL "$DEFAULT_REPLICA_URL"
}

# Over TCP as root, like the tests: whichever checkout's state directory the running replica
# has, every `up` reaches it the same way.
replica_sql() { # replica_sql SQL: run on the replica, print the bare answer
    mariadb --protocol=tcp -h "$HOST" -P "$REPLICA_PORT" -uroot -N -B -e "$1"
}

replica_status() { # vertical, with the field names (replica_sql's -N drops them)
    mariadb --protocol=tcp -h "$HOST" -P "$REPLICA_PORT" -uroot -e "SHOW SLAVE STATUS\G"
}

replica_replicating() {
    local status
    status="$(replica_status 2>/dev/null)" || return 1
    grep -q 'Slave_IO_Running: Yes' <<<"$status" && grep -q 'Slave_SQL_Running: Yes' <<<"$status"
}

replica_start() {
    local fresh=0 deadline
    # The server runs as user mysql: its directories must be reachable and its own.
    as_root install -d -m 755 -o mysql "$REPLICA_DIR" "$REPLICA_DIR/run" "$REPLICA_DIR/log"
    if [[ ! -d $REPLICA_DIR/data/mysql ]]; then
        log "MariaDB replica: initialising $REPLICA_DIR/data"
        as_root rm -rf "$REPLICA_DIR/data"
        as_root mariadb-install-db --no-defaults --user=mysql --datadir="$REPLICA_DIR/data" \
            --skip-test-db >/dev/null
        fresh=1
    fi
    log "starting the MariaDB replica on $HOST:$REPLICA_PORT (log $REPLICA_LOG)"
    # --no-defaults: Debian's my.cnf names the primary's port, socket and data directory.
    # read-only keeps every writer but root (replication included) off it.
    as_root setsid mariadbd --no-defaults --user=mysql --datadir="$REPLICA_DIR/data" \
        --bind-address="$HOST" --port="$REPLICA_PORT" --socket="$REPLICA_SOCKET" \
        --pid-file="$REPLICA_DIR/run/mysqld.pid" --log-error="$REPLICA_LOG" \
        --server-id=2 --read-only --relay-log=relay-bin --skip-log-bin \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
        </dev/null >/dev/null 2>&1 9>&- &
    echo mariadbd >"$RUN_DIR/mariadb-replica.started"
    deadline=$((SECONDS + MARIADB_START_TIMEOUT))
    until as_root mariadb-admin --protocol=socket --socket="$REPLICA_SOCKET" -uroot \
        --connect-timeout=2 ping >/dev/null 2>&1; do
        ((SECONDS < deadline)) ||
            die "the MariaDB replica did not answer within ${MARIADB_START_TIMEOUT}s; see $REPLICA_LOG"
        sleep 0.5
    done
    ((fresh)) || return 0
    # The same TCP login as the primary's (mariadb_configure), on this server only; until
    # then only the OS root gets in, over the socket.
    as_root mariadb --protocol=socket --socket="$REPLICA_SOCKET" -uroot -e "
ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
FLUSH PRIVILEGES;"
}

# Copy the primary's database once (a consistent dump that records its GTID position), then
# replicate from that position on. A replica that has a source configured was copied before.
replica_configure() {
    mariadb_sql "CREATE USER IF NOT EXISTS '$REPLICATION_USER'@'127.0.0.1' IDENTIFIED BY '$REPLICATION_USER';
GRANT REPLICATION SLAVE ON *.* TO '$REPLICATION_USER'@'127.0.0.1';" >/dev/null ||
        die "could not create the replication user on the primary"
    replica_replicating && return 0
    if replica_status | grep -q "Master_Host: $HOST"; then
        log "MariaDB replica: starting replication again"
        replica_sql "START SLAVE;" >/dev/null
    else
        log "MariaDB replica: copying database $DATABASE_NAME from the primary"
        mariadb-dump --protocol=tcp -h "$HOST" -P "$MARIADB_PORT" -uroot --single-transaction \
            --gtid --master-data=1 --databases "$DATABASE_NAME" |
            mariadb --protocol=tcp -h "$HOST" -P "$REPLICA_PORT" -uroot ||
            die "could not copy $DATABASE_NAME from the primary into the replica"
        log "MariaDB replica: replicating from $HOST:$MARIADB_PORT"
        replica_sql "STOP SLAVE;
CHANGE MASTER TO MASTER_HOST='$HOST', MASTER_PORT=$MARIADB_PORT,
  MASTER_USER='$REPLICATION_USER', MASTER_PASSWORD='$REPLICATION_USER',
  MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
START SLAVE;" >/dev/null
    fi
    local deadline=$((SECONDS + MARIADB_START_TIMEOUT))
    until replica_replicating; do
        ((SECONDS < deadline)) || {
            replica_status | grep -E 'Running|Last_.*Error' >&2 || true
            die "the MariaDB replica does not replicate; see $REPLICA_LOG (a replica that diverged is started again from a copy after: bash scripts/services.sh down; rm -rf $REPLICA_DIR)"
        }
        sleep 0.5
    done
}

replica_up() {
    if ! replica_wanted; then
        log "MariaDB replica: skipped, the database or MEMSTREAM_TEST_DATABASE_READ_URL points elsewhere"
        return 0
    fi
    if [[ "$(mariadb_sql "SELECT @@log_bin")" != 1 ]]; then
        log "MariaDB replica: skipped, the primary on :$MARIADB_PORT writes no binary log (not started by services.sh)"
        return 0
    fi
    if port_open "$REPLICA_PORT"; then
        log "MariaDB replica: already answering on $HOST:$REPLICA_PORT"
    else
        replica_start
    fi
    replica_configure
    log "MariaDB replica: ready on $HOST:$REPLICA_PORT"
}

replica_down() {
    [[ -f $RUN_DIR/mariadb-replica.started ]] || return 0
    if port_open "$REPLICA_PORT"; then
        log "stopping the MariaDB replica"
        mariadb-admin --protocol=tcp -h "$HOST" -P "$REPLICA_PORT" -uroot shutdown ||
            log "mariadb-admin shutdown failed; the replica may still be running"
    fi
    rm -f "$RUN_DIR/mariadb-replica.started"
}

# ---------------------------------------------------------------- Redis

redis_wanted() { wanted MEMSTREAM_REDIS_URL "$DEFAULT_REDIS_URL"; }

redis_up() {
    if ! redis_wanted; then
        log "Redis: skipped, MEMSTREAM_REDIS_URL points elsewhere"
        return 0
    fi
    if port_open "$REDIS_PORT"; then
        log "Redis: already answering on $HOST:$REDIS_PORT"
        return 0
    fi
    mkdir -p "$STATE_DIR/redis"
    log "starting Redis (log $REDIS_LOG)"
    # A cache for tests: no RDB snapshots, no AOF. --daemonize forks it away from
    # this shell and writes the pid file.
    redis-server --bind "$HOST" --port "$REDIS_PORT" --protected-mode yes \
        --daemonize yes --pidfile "$RUN_DIR/redis.pid" --logfile "$REDIS_LOG" \
        --dir "$STATE_DIR/redis" --save '' --appendonly no 9>&-
    local deadline=$((SECONDS + REDIS_START_TIMEOUT))
    until [[ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null)" == PONG ]]; do
        ((SECONDS < deadline)) ||
            die "Redis did not answer on $HOST:$REDIS_PORT within ${REDIS_START_TIMEOUT}s; see $REDIS_LOG"
        sleep 0.2
    done
    log "Redis: ready on $HOST:$REDIS_PORT"
}

redis_down() {
    stop_pid Redis "$RUN_DIR/redis.pid" redis-server
}

# ---------------------------------------------------------------- Redis Cluster

redis_cluster_wanted() { wanted MEMSTREAM_TEST_REDIS_CLUSTER_URL "$DEFAULT_REDIS_CLUSTER_URL"; }

# Every node answers and agrees that the cluster is whole: three nodes, every slot served.
redis_cluster_ok() {
    local port info
    for port in "${REDIS_CLUSTER_PORTS[@]}"; do
        info="$(redis-cli -h "$HOST" -p "$port" cluster info 2>/dev/null)" || return 1
        grep -q '^cluster_state:ok' <<<"$info" || return 1
        grep -q "^cluster_known_nodes:${#REDIS_CLUSTER_PORTS[@]}" <<<"$info" || return 1
    done
}

redis_cluster_node_start() { # redis_cluster_node_start PORT: a fresh, empty node
    local port=$1 dir="$STATE_DIR/redis-cluster/$1"
    # No persistence, so a node's data is gone with its process; its cluster state must go
    # too, or a restarted node would claim slots of a cluster that no longer exists.
    rm -rf "$dir"
    mkdir -p "$dir"
    # A short node timeout: a master that dies is marked failed within seconds. Without
    # full coverage the other masters keep serving their slots meanwhile.
    redis-server --bind "$HOST" --port "$port" --protected-mode yes \
        --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" \
        --cluster-node-timeout 2000 --cluster-require-full-coverage no \
        --daemonize yes --pidfile "$RUN_DIR/redis-cluster-$port.pid" \
        --logfile "$LOG_DIR/redis-cluster-$port.log" \
        --dir "$dir" --save '' --appendonly no 9>&-
}

redis_cluster_up() {
    if ! redis_cluster_wanted; then
        log "Redis Cluster: skipped, MEMSTREAM_TEST_REDIS_CLUSTER_URL points elsewhere"
        return 0
    fi
    if redis_cluster_ok; then
        log "Redis Cluster: already answering on $HOST:${REDIS_CLUSTER_PORTS[*]}"
        return 0
    fi
    # A cluster that is not whole (a node died, or a create was interrupted) is a cache of
    # tests only: start it again from nothing.
    local port addresses=() deadline
    for port in "${REDIS_CLUSTER_PORTS[@]}"; do
        stop_pid "Redis Cluster node $port" "$RUN_DIR/redis-cluster-$port.pid" redis-server
        if port_open "$port"; then
            die "$HOST:$port answers but is not a node services.sh started; stop it or set MEMSTREAM_TEST_REDIS_CLUSTER_URL"
        fi
    done
    log "starting Redis Cluster nodes on ports ${REDIS_CLUSTER_PORTS[*]} (logs $LOG_DIR/redis-cluster-*.log)"
    for port in "${REDIS_CLUSTER_PORTS[@]}"; do
        redis_cluster_node_start "$port"
        addresses+=("$HOST:$port")
    done
    deadline=$((SECONDS + REDIS_START_TIMEOUT))
    for port in "${REDIS_CLUSTER_PORTS[@]}"; do
        until [[ "$(redis-cli -h "$HOST" -p "$port" ping 2>/dev/null)" == PONG ]]; do
            ((SECONDS < deadline)) ||
                die "Redis Cluster node $HOST:$port did not answer within ${REDIS_START_TIMEOUT}s"
            sleep 0.2
        done
    done
    redis-cli --cluster create "${addresses[@]}" --cluster-replicas 0 --cluster-yes >"$LOG_DIR/redis-cluster-create.log" 2>&1 ||
        die "redis-cli --cluster create failed; see $LOG_DIR/redis-cluster-create.log"
    until redis_cluster_ok; do
        ((SECONDS < deadline)) ||
            die "the Redis Cluster on ports ${REDIS_CLUSTER_PORTS[*]} did not become whole within ${REDIS_START_TIMEOUT}s"
        sleep 0.2
    done
    log "Redis Cluster: ready on $HOST:${REDIS_CLUSTER_PORTS[*]}"
}

redis_cluster_down() {
    local port
    for port in "${REDIS_CLUSTER_PORTS[@]}"; do
        stop_pid "Redis Cluster node $port" "$RUN_DIR/redis-cluster-$port.pid" redis-server
    done
}

# ---------------------------------------------------------------- Kafka

kafka_wanted() { wanted MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS "$DEFAULT_KAFKA_BOOTSTRAP_SERVERS"; }

# Is the broker really serving? An open port is not enough: KRaft binds the
# listener before the broker has caught up with the metadata log and been
# unfenced. So send a Metadata v0 request and require at least one broker in
# the answer (only live, unfenced brokers are listed). python3's standard
# library only, because the project's venv may not exist yet.
kafka_ready() {
    python3 - "$HOST" "$KAFKA_PORT" <<'PY' 2>/dev/null
import socket, struct, sys

host, port = sys.argv[1], int(sys.argv[2])
client_id = b"memstream-services"
# api_key=3 (Metadata), api_version=0, correlation_id=1, client_id; topics=[] (all)
request = struct.pack(">hhih", 3, 0, 1, len(client_id)) + client_id + struct.pack(">i", 0)
with socket.create_connection((host, port), timeout=3) as sock:
    sock.sendall(struct.pack(">i", len(request)) + request)
    head = b""
    while len(head) < 12:  # size, correlation_id, number of brokers
        chunk = sock.recv(12 - len(head))
        if not chunk:
            sys.exit(1)
        head += chunk
_size, correlation_id, brokers = struct.unpack(">iii", head)
sys.exit(0 if correlation_id == 1 and brokers >= 1 else 1)
PY
}

kafka_java() { # kafka_java MAIN-CLASS ARGS...: run a Kafka command-line tool
    java -Dlog4j.configuration="file:$KAFKA_CONF_DIR/tools-log4j.properties" \
        -cp "$KAFKA_LIBS/*" "$@"
}

# Copy the jars of scripts/kafka/pom.xml into $KAFKA_LIBS once; again only when
# the pom changes (its checksum is kept beside the jars).
kafka_fetch_jars() {
    local pom="$KAFKA_CONF_DIR/pom.xml" sum
    sum="$(sha256sum "$pom" | cut -d' ' -f1)"
    if [[ -f $KAFKA_LIBS/.pom.sha256 && "$(cat "$KAFKA_LIBS/.pom.sha256")" == "$sum" ]]; then
        return 0
    fi
    log "Kafka: fetching jars with Maven into $KAFKA_LIBS"
    # Into a temporary directory first, so an interrupted download is not
    # mistaken for a complete one next time.
    rm -rf "$KAFKA_LIBS.tmp"
    # Maven prints its errors on stdout: keep all of it in a log, shown on failure.
    if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$KAFKA_LIBS.tmp" >"$LOG_DIR/maven.log" 2>&1; then
        tail -n 30 "$LOG_DIR/maven.log" >&2
        die "Maven could not fetch the Kafka jars of scripts/kafka/pom.xml; see $LOG_DIR/maven.log"
    fi
    echo "$sum" >"$KAFKA_LIBS.tmp/.pom.sha256"
    rm -rf "$KAFKA_LIBS"
    mv "$KAFKA_LIBS.tmp" "$KAFKA_LIBS"
}

# Written on every start, so changes here take effect after `down` + `up`.
kafka_write_properties() {
    cat >"$KAFKA_PROPERTIES" <<EOF
# Generated by scripts/services.sh on every start: edit the script, not this file.
# KRaft: one process is both broker and controller (a one-voter quorum).
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$KAFKA_DATA

# One node: every internal topic has one replica.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
min.insync.replicas=1
default.replication.factor=1
# Internal topics are created on first use (first consumer group, first
# transaction); 50 partitions each, the default, only makes that first use slow.
offsets.topic.num.partitions=8
transaction.state.log.num.partitions=8

# Tests create topics by producing to them and must not wait 3 s per group join.
auto.create.topics.enable=true
delete.topic.enable=true
num.partitions=8
group.initial.rebalance.delay.ms=0

# Keep data a week whatever its size: tests and benchmarks must not lose
# records to retention; the directory is thrown away with var/ anyway.
log.retention.hours=168
log.retention.bytes=-1
log.segment.bytes=1073741824
EOF
}

kafka_start() {
    need_command java openjdk-17-jre-headless
    need_command mvn maven
    apt_install_needed
    mkdir -p "$KAFKA_DIR" "$KAFKA_DATA"
    kafka_fetch_jars
    kafka_write_properties

    # Format the storage once; meta.properties marks a formatted log directory.
    if [[ ! -f $KAFKA_DATA/meta.properties ]]; then
        local cluster_id
        cluster_id="$(kafka_java kafka.tools.StorageTool random-uuid)"
        log "Kafka: formatting $KAFKA_DATA (cluster id $cluster_id)"
        kafka_java kafka.tools.StorageTool format -t "$cluster_id" -c "$KAFKA_PROPERTIES" >/dev/null
    fi

    # Keep the previous run's log for post-mortems.
    [[ ! -f $KAFKA_LOG ]] || mv -f "$KAFKA_LOG" "$KAFKA_LOG.1"
    log "starting Kafka (log $KAFKA_LOG)"
    # A pid file left by a killed broker must not be read as the new one's.
    rm -f "$RUN_DIR/kafka.pid"
    # setsid: out of our process group, so it outlives this shell and `make`.
    # The inner bash writes its own pid and then execs java, so the pid file
    # holds the JVM's pid whether or not setsid had to fork.
    local heap_opts
    read -ra heap_opts <<<"$KAFKA_HEAP_OPTS"
    # Every test has topics of its own, so a long suite leaves tens of thousands of partition
    # files open; the default soft limit of open files stops the broker on its next start.
    # shellcheck disable=SC2016 # $$ and "$@" are meant for the inner bash
    setsid bash -c 'ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"; echo $$ >"$0"; exec "$@"' "$RUN_DIR/kafka.pid" \
        java "${heap_opts[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
        -Djava.awt.headless=true \
        -Dlog4j.configuration="file:$KAFKA_CONF_DIR/log4j.properties" \
        -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_PROPERTIES" \
        </dev/null >"$KAFKA_LOG" 2>&1 9>&- &

    kafka_wait_ready
}

# Wait for kafka_ready, up to KAFKA_START_TIMEOUT: also used when the port is
# open but the broker is still starting (e.g. another `up` just launched it).
kafka_wait_ready() {
    local deadline=$((SECONDS + KAFKA_START_TIMEOUT))
    until kafka_ready; do
        # A broker of ours that died (bad config, port taken) will not come
        # back: say so at once instead of waiting for the timeout.
        if [[ -f $RUN_DIR/kafka.pid ]] && ! pid_alive "$RUN_DIR/kafka.pid"; then
            # The cause is usually the last "Caused by" (e.g. a port in use).
            grep -E '\] (ERROR|FATAL) |^Caused by' "$KAFKA_LOG" | tail -n 6 >&2 || true
            die "Kafka exited while starting; see $KAFKA_LOG"
        fi
        ((SECONDS < deadline)) ||
            die "no working Kafka broker on $HOST:$KAFKA_PORT after ${KAFKA_START_TIMEOUT}s; see $KAFKA_LOG"
        sleep 0.5
    done
}

kafka_up() {
    if ! kafka_wanted; then
        log "Kafka: skipped, MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS points elsewhere"
        return 0
    fi
    if port_open "$KAFKA_PORT"; then
        log "Kafka: already answering on $HOST:$KAFKA_PORT"
        kafka_wait_ready
    else
        kafka_start
    fi
    log "Kafka: ready on $HOST:$KAFKA_PORT"
}

kafka_down() {
    stop_pid Kafka "$RUN_DIR/kafka.pid" kafka.Kafka
}

# ---------------------------------------------------------------- commands

print_env() {
    printf 'export %s=%q\n' \
        MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS "${MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS:-$DEFAULT_KAFKA_BOOTSTRAP_SERVERS}" \
        MEMSTREAM_DATABASE_URL "${MEMSTREAM_DATABASE_URL:-$DEFAULT_DATABASE_URL}" \
        MEMSTREAM_TEST_DATABASE_READ_URL "${MEMSTREAM_TEST_DATABASE_READ_URL:-$DEFAULT_REPLICA_URL}" \
        MEMSTREAM_REDIS_URL "${MEMSTREAM_REDIS_URL:-$DEFAULT_REDIS_URL}" \
        MEMSTREAM_TEST_REDIS_CLUSTER_URL "${MEMSTREAM_TEST_REDIS_CLUSTER_URL:-$DEFAULT_REDIS_CLUSTER_URL}"
}

# One `up` or `down` at a time on this machine (the ports are the machine's, not
# the clone's): a second `make test` waits instead of starting a second broker.
# Every daemon is started with 9>&- so that it does not inherit (and hold) it.
take_lock() {
    exec 9>"${TMPDIR:-/tmp}/memstream-services.lock"
    flock 9
}

cmd_up() {
    local started=$SECONDS
    mkdir -p "$RUN_DIR" "$LOG_DIR"
    take_lock
    # Install the Debian server packages first, in one apt-get run.
    if mariadb_wanted && ! port_open "$MARIADB_PORT"; then
        need_command mysqld_safe mariadb-server
    fi
    if redis_wanted || redis_cluster_wanted; then
        need_command redis-server redis-server
        need_command redis-cli redis-tools # the cluster's create, and the readiness checks
    fi
    if kafka_wanted; then
        need_command python3 python3 # kafka_ready
    fi
    # The Kafka jars are wanted even when a broker already answers (another checkout's):
    # tests/support/kraft.py starts KRaft nodes of its own from this checkout's $KAFKA_LIBS.
    need_command java openjdk-17-jre-headless
    need_command mvn maven
    need_command chromium chromium # tests/integration/test_dashboard.py (headless)
    need_command wrk wrk           # bench/loadpath/ (load generator)
    apt_install_needed

    mariadb_up
    replica_up
    redis_up
    redis_cluster_up
    mkdir -p "$KAFKA_DIR"
    kafka_fetch_jars
    kafka_up
    log "done in $((SECONDS - started))s"
    print_env
}

cmd_down() {
    take_lock
    # Reverse order of `up`; each only if this script started it.
    kafka_down
    redis_cluster_down
    redis_down
    replica_down
    mariadb_down
    log "stopped what services.sh had started"
}

cmd_status() {
    local name port
    for name in MariaDB:$MARIADB_PORT "MariaDB replica:$REPLICA_PORT" Redis:$REDIS_PORT Kafka:$KAFKA_PORT \
        "${REDIS_CLUSTER_PORTS[@]/#/Redis Cluster node:}"; do
        port=${name#*:}
        if port_open "$port"; then
            log "${name%:*}: answering on $HOST:$port"
        else
            log "${name%:*}: not answering on $HOST:$port"
        fi
    done
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
env) print_env ;;
status) cmd_status ;;
*)
    echo "usage: bash $0 up|down|env|status" >&2
    exit 2
    ;;
esac
