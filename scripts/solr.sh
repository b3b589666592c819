#!/usr/bin/env bash
# A local Solr with the demo product catalogue, a remote engine for the remote search
# configurations' tests: install | start | stop | status | load | url.
#
# The Solr server distribution is not on Maven Central, its jars are: solr/pom.xml names
# solr-core and solr-test-framework (whose JettySolrRunner runs Solr inside Jetty), mvn copies
# them and their dependencies, and javac builds the launcher solr/src/WorkbenchSolr.java against
# them, once, under $WORKBENCH_HOME/solr/build (rebuilt when the pom or the launcher change).
# The solr home (solr/home: solr.xml and the core "products" with its explicit schema.xml) is
# copied to $WORKBENCH_HOME/solr/home; when its configuration changes, the next start (after a
# stop) drops the core's index and `load` indexes the catalogue again. Solr listens on
# 127.0.0.1 only. Callers at once (two test sessions) take turns: the second finds it running.
#
#   install  fetch the jars and build the launcher (start does it when needed)
#   start    start Solr (reuse one that answers) and wait for the products core; prints the URL
#   load     start, then index workbench/demo/data/ubi_ecommerce_products.json.gz into products
#            (skipped when the core holds as many documents); prints the URL
#   stop, status, url
#
# Settings (environment):
#   SOLR_PORT       HTTP port (default 8983); the base URL is http://127.0.0.1:$SOLR_PORT/solr
#   SOLR_HEAP       JVM heap (default 512m: the machine also runs OpenSearch)
#   SOLR_VERSION    Solr release (default: the pom's, 9.10.1); a JDK 11 to 21 runs it
# Logs: $WORKBENCH_HOME/logs/solr/solr.log (Solr) and $WORKBENCH_HOME/logs/solr-console.log
#       (start-up output and the build's).

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT="${SOLR_PORT:-8983}"
HEAP="${SOLR_HEAP:-512m}"
URL="http://127.0.0.1:$PORT/solr"
SRC="$REPO_ROOT/scripts/solr"
SOLR_DIR="$WORKBENCH_HOME/solr"
BUILD="$SOLR_DIR/build"
HOME_DIR="$SOLR_DIR/home"
PID_FILE="$RUN_DIR/solr.pid"
PID_PATTERN=WorkbenchSolr
NODE_LOG_DIR="$LOG_DIR/solr"
CONSOLE_LOG="$LOG_DIR/solr-console.log"
CATALOGUE="$REPO_ROOT/workbench/demo/data/ubi_ecommerce_products.json.gz"

failed() {
  show_log "$CONSOLE_LOG" "$NODE_LOG_DIR/solr.log"
  die "$1; logs: $CONSOLE_LOG, $NODE_LOG_DIR/solr.log"
}

# need_tools: mvn and a JDK from Debian's packages when missing.
need_tools() {
  local packages=()
  command -v mvn >/dev/null || packages+=(maven)
  [ -n "$(jdk)" ] || packages+=(openjdk-17-jdk-headless)
  [ ${#packages[@]} -eq 0 ] && return 0
  say "installing ${packages[*]} from Debian's packages"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >&2 \
    || die "could not install ${packages[*]}"
}

# jdk: a JDK under /usr/lib/jvm that Solr 9 supports (11 to 21), the newest such; empty if none.
jdk() {
  local best="" best_major=0 dir major
  for dir in /usr/lib/jvm/*/; do
    dir=${dir%/}
    [ -x "$dir/bin/javac" ] || continue
    major=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$dir/release" 2>/dev/null)
    [ -n "$major" ] && [ "$major" -ge 11 ] && [ "$major" -le 21 ] || continue
    if [ "$major" -gt "$best_major" ]; then best=$dir; best_major=$major; fi
  done
  echo "$best"
}

# stamp: what the build is made from; a different stamp means build again.
stamp() {
  { cat "$SRC/pom.xml" "$SRC/src/WorkbenchSolr.java"; echo "${SOLR_VERSION:-}"; } | sha256sum | cut -d' ' -f1
}

# home_stamp: what the core's index was made with; a different one means index again.
home_stamp() {
  (cd "$SRC/home" && find . -type f -print0 | sort -z | xargs -0 cat) | sha256sum | cut -d' ' -f1
}

install() {
  local java_home tmp version_flag=()
  need_tools
  java_home=$(jdk)
  [ -n "$java_home" ] || die "Solr 9 needs a JDK 11 to 21 under /usr/lib/jvm"
  if [ "$(cat "$BUILD/stamp" 2>/dev/null)" != "$(stamp)" ]; then
    say "building the Solr launcher (jars from Maven Central, once) under $BUILD"
    [ -z "${SOLR_VERSION:-}" ] || version_flag=(-Dsolr.version="$SOLR_VERSION")
    tmp=$(mktemp -d)
    { (cd "$SRC" && mvn -B -q "${version_flag[@]}" \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$tmp/lib") \
      && mkdir -p "$tmp/classes" \
      && "$java_home/bin/javac" -nowarn -d "$tmp/classes" -cp "$tmp/lib/*" "$SRC/src/WorkbenchSolr.java"
    } >"$CONSOLE_LOG" 2>&1 || { rm -rf "$tmp"; failed "could not build the Solr launcher"; }
    stamp >"$tmp/stamp"
    mkdir -p "$SOLR_DIR"
    rm -rf "$BUILD"
    mv "$tmp" "$BUILD"
  fi
  if [ "$(cat "$SOLR_DIR/home.stamp" 2>/dev/null)" != "$(home_stamp)" ]; then
    responding && die "the solr home under $HOME_DIR changed: stop Solr first (scripts/solr.sh stop)"
    say "installing the solr home (core products) under $HOME_DIR"
    # A changed schema cannot read the old index: drop it, `load` indexes again.
    rm -rf "$HOME_DIR"
    mkdir -p "$HOME_DIR"
    cp -r "$SRC/home/." "$HOME_DIR/"
    home_stamp >"$SOLR_DIR/home.stamp"
  fi
}

responding() {
  curl -fsS --max-time 3 "$URL/products/select?q=*:*&rows=0&wt=json" 2>/dev/null | grep -q '"numFound"'
}

start() {
  if responding; then
    say "Solr already answers at $URL; reusing it"
    echo "$URL"
    return 0
  fi
  if pid_alive "$PID_FILE" "$PID_PATTERN"; then
    say "Solr (pid $(cat "$PID_FILE")) is starting; waiting"
  else
    install
    local java_home
    java_home=$(jdk)
    mkdir -p "$NODE_LOG_DIR"
    say "starting Solr on $URL with $java_home"
    # The client compiler only and the serial collector: on two busy cores Solr starts in about
    # half the time (10 s rather than 20-25 s), and a test engine needs no peak throughput.
    nohup "$java_home/bin/java" "-Xms$HEAP" "-Xmx$HEAP" \
      -Dsolr.log.dir="$NODE_LOG_DIR" -Dlog4j2.configurationFile="$SRC/log4j2.xml" \
      -Dhost=127.0.0.1 -Djetty.host=127.0.0.1 -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
      -cp "$BUILD/classes:$BUILD/lib/*" WorkbenchSolr "$HOME_DIR" "$PORT" \
      >"$CONSOLE_LOG" 2>&1 </dev/null 9>&- &
    echo $! >"$PID_FILE"
  fi
  local i
  for i in $(seq 120); do
    if responding; then
      say "Solr is up at $URL (log: $NODE_LOG_DIR/solr.log)"
      echo "$URL"
      return 0
    fi
    pid_alive "$PID_FILE" "$PID_PATTERN" || failed "Solr exited"
    sleep 0.5
  done
  failed "Solr did not answer in 60 s"
}

load() {
  local python
  start >/dev/null
  python=$(python_bin)
  [ -x "$python" ] || python=python3
  "$python" "$SRC/load.py" "$URL" "$CATALOGUE" || failed "could not index the catalogue into Solr"
  echo "$URL"
}

status() {
  if responding; then
    curl -fsS "$URL/products/select?q=*:*&rows=0&wt=json" | sed -n 's/.*"numFound":\([0-9]*\).*/products: \1 documents/p'
    echo "url: $URL"
    pid_alive "$PID_FILE" "$PID_PATTERN" && echo "pid: $(cat "$PID_FILE")" || echo "pid: (not started by this script)"
  else
    echo "Solr is not running at $URL"
    return 3
  fi
}

# serialised: one caller at a time installs, starts or loads
locked() {
  exec 9>"$RUN_DIR/solr.lock"
  flock -w 900 9 || die "another scripts/solr.sh held $RUN_DIR/solr.lock for 15 minutes"
  "$@"
}

case "${1:-}" in
  install) locked install ;;
  start) locked start ;;
  load) locked load ;;
  stop) stop_pid "$PID_FILE" Solr "$PID_PATTERN" ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 install|start|stop|status|load|url" >&2; exit 2 ;;
esac
