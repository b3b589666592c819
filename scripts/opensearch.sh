#!/usr/bin/env bash
# A local single-node OpenSearch for the workbench: start | stop | status | url.
#
# Downloads the integ-test distribution from Maven Central with mvn
# (org.opensearch.distribution.integ-test-zip:opensearch, packaging zip), caches it under
# $WORKBENCH_HOME/opensearch, and runs it on loopback with no security plugin. Idempotent: a
# second start reuses the running node. As root, the node runs as the user "wbsearch".
#
# Settings (environment):
#   OPENSEARCH_VERSION  version to run (default: newest 3.x if a JDK >= 21 is under
#                       /usr/lib/jvm, else newest 2.19.x)
#   OPENSEARCH_PORT     HTTP port (default 9200); transport uses OPENSEARCH_PORT + 100
#   OPENSEARCH_HEAP     JVM heap (default 2g)
#   MAVEN_REPO_URL      Maven repository (default https://repo1.maven.org/maven2)
# Logs: $WORKBENCH_HOME/logs/opensearch/opensearch.log (node) and
#       $WORKBENCH_HOME/logs/opensearch-console.log (start-up output).

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT="${OPENSEARCH_PORT:-9200}"
HEAP="${OPENSEARCH_HEAP:-2g}"
MAVEN_REPO_URL="${MAVEN_REPO_URL:-https://repo1.maven.org/maven2}"
OS_HOME="$WORKBENCH_HOME/opensearch"
PID_FILE="$RUN_DIR/opensearch.pid"
URL="http://127.0.0.1:$PORT"
NODE_USER=wbsearch
PID_PATTERN=org.opensearch.bootstrap.OpenSearch
GROUP_PATH="org/opensearch/distribution/integ-test-zip/opensearch"

# java_major DIR: the feature version of the JDK in DIR (from its release file).
java_major() {
  local v
  v=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$1/release" 2>/dev/null)
  echo "${v:-0}"
}

# need_tools: install mvn, unzip and a JDK from Debian's packages when missing.
need_tools() {
  local packages=()
  command -v mvn >/dev/null || packages+=(maven)
  command -v unzip >/dev/null || packages+=(unzip)
  compgen -G "/usr/lib/jvm/*/bin/java" >/dev/null || packages+=(openjdk-17-jdk-headless)
  [ ${#packages[@]} -eq 0 ] && return 0
  say "installing ${packages[*]} from Debian's packages"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >&2 \
    || die "could not install ${packages[*]}"
}

# best_jdk: the JDK under /usr/lib/jvm with the highest major version.
best_jdk() {
  local best="" best_major=0 dir major
  for dir in /usr/lib/jvm/*/; do
    dir=${dir%/}
    [ -x "$dir/bin/java" ] || continue
    major=$(java_major "$dir")
    if [ "$major" -gt "$best_major" ]; then best=$dir; best_major=$major; fi
  done
  [ -n "$best" ] || die "no JDK found under /usr/lib/jvm"
  echo "$best"
}

# pick_version JDK_MAJOR: newest release the JDK can run, read from the Maven metadata.
pick_version() {
  local major=$1 versions
  versions=$(curl -fsS --max-time 20 "$MAVEN_REPO_URL/$GROUP_PATH/maven-metadata.xml" 2>/dev/null \
    | sed -n 's:.*<version>\([0-9][0-9.]*\)</version>.*:\1:p' | sort -V) || true
  if [ "$major" -ge 21 ]; then
    v=$(echo "$versions" | grep '^3\.' | tail -n 1)
    [ -n "$v" ] && { echo "$v"; return; }
  fi
  v=$(echo "$versions" | grep '^2\.19\.' | tail -n 1)
  [ -n "$v" ] && { echo "$v"; return; }
  # Metadata unreachable: the newest releases known when this script was written.
  if [ "$major" -ge 21 ]; then echo 3.6.0; else echo 2.19.6; fi
}

responding() {
  curl -fsS --max-time 3 "$URL/" 2>/dev/null | grep -q '"distribution" : "opensearch"\|"number"'
}

download() {
  local version=$1 dist="$OS_HOME/dist/opensearch-$version" tmp
  if [ -x "$dist/bin/opensearch" ]; then echo "$dist"; return; fi
  say "fetching org.opensearch.distribution.integ-test-zip:opensearch:$version:zip with mvn"
  tmp=$(mktemp -d)
  mvn -B -q \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
    -Dartifact="org.opensearch.distribution.integ-test-zip:opensearch:$version:zip" \
    -DoutputDirectory="$tmp" >&2 \
    || die "mvn could not resolve the OpenSearch $version integ-test distribution"
  mkdir -p "$OS_HOME/dist"
  (cd "$tmp" && unzip -q "opensearch-$version.zip")
  rm -rf "$dist"
  mv "$tmp/opensearch-$version" "$dist"
  rm -rf "$tmp"
  echo "$dist"
}

# failed MESSAGE: stop with MESSAGE after showing the node's logs.
failed() {
  show_log "$LOG_DIR/opensearch-console.log" "$LOG_DIR/opensearch/opensearch.log"
  die "$1; logs: $LOG_DIR/opensearch-console.log, $LOG_DIR/opensearch/opensearch.log"
}

ensure_user() {
  [ "$(id -u)" = 0 ] || return 0
  id "$NODE_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$NODE_USER"
}

start() {
  if responding; then
    say "OpenSearch already answers at $URL; reusing it"
    echo "$URL"
    return 0
  fi
  if pid_alive "$PID_FILE" "$PID_PATTERN"; then
    say "OpenSearch (pid $(cat "$PID_FILE")) is starting; waiting"
  else
    local jdk major version dist
    need_tools
    jdk=$(best_jdk)
    major=$(java_major "$jdk")
    version="${OPENSEARCH_VERSION:-$(pick_version "$major")}"
    if [[ "$version" == 3.* ]] && [ "$major" -lt 21 ]; then
      die "OpenSearch $version needs JDK 21+, the newest under /usr/lib/jvm is $major"
    fi
    dist=$(download "$version")
    ensure_user
    mkdir -p "$OS_HOME/data" "$LOG_DIR/opensearch"
    if [ "$(id -u)" = 0 ]; then
      chown -R "$NODE_USER" "$dist" "$OS_HOME/data" "$LOG_DIR/opensearch"
      chown "$NODE_USER" "$RUN_DIR"
    fi
    # A pid file left by a node that is gone (a previous boot, a kill -9) would read as "exited".
    rm -f "$PID_FILE"
    say "starting OpenSearch $version on $URL with $jdk (JDK $major)"
    local cmd=(
      env OPENSEARCH_JAVA_HOME="$jdk" OPENSEARCH_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP"
      "$dist/bin/opensearch" -d -p "$PID_FILE"
      -Ecluster.name=opensearch -Enode.name=workbench-node
      -Ediscovery.type=single-node -Enetwork.host=127.0.0.1
      -Ehttp.port="$PORT" -Etransport.port="$((PORT + 100))"
      -Epath.data="$OS_HOME/data" -Epath.logs="$LOG_DIR/opensearch"
      -Ecluster.routing.allocation.disk.threshold_enabled=false
    )
    if [ "$(id -u)" = 0 ]; then
      runuser -u "$NODE_USER" -- "${cmd[@]}" >"$LOG_DIR/opensearch-console.log" 2>&1 </dev/null \
        || failed "OpenSearch failed to start"
    else
      "${cmd[@]}" >"$LOG_DIR/opensearch-console.log" 2>&1 </dev/null \
        || failed "OpenSearch failed to start"
    fi
  fi
  local i
  for i in $(seq 180); do
    if curl -fsS --max-time 3 "$URL/_cluster/health?wait_for_status=yellow&timeout=1s" >/dev/null 2>&1; then
      say "OpenSearch is healthy at $URL (log: $LOG_DIR/opensearch/opensearch.log)"
      echo "$URL"
      return 0
    fi
    # The pid file appears once the daemon has forked; a file whose process is gone means it died.
    if [ -f "$PID_FILE" ] && ! pid_alive "$PID_FILE" "$PID_PATTERN"; then
      failed "OpenSearch exited"
    fi
    sleep 1
  done
  failed "OpenSearch did not become healthy in 180 s"
}

status() {
  if responding; then
    curl -fsS "$URL/_cluster/health?pretty" 2>/dev/null | sed -n 's/.*"\(status\|cluster_name\)".*: "\(.*\)".*/\1: \2/p'
    echo "url: $URL"
    pid_alive "$PID_FILE" "$PID_PATTERN" && echo "pid: $(cat "$PID_FILE")" || echo "pid: (not started by this script)"
  else
    echo "OpenSearch is not running at $URL"
    return 3
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop_pid "$PID_FILE" OpenSearch "$PID_PATTERN" ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
