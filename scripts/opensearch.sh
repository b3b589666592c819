#!/usr/bin/env bash
# A local single-node OpenSearch for the workbench: start | stop | status | url | ca.
#
# Downloads the integ-test distribution from Maven Central with mvn
# (org.opensearch.distribution.integ-test-zip:opensearch, packaging zip), caches it under
# $WORKBENCH_HOME/opensearch, and runs it on loopback with no security plugin. Idempotent: a
# second start reuses the running node. As root, the node runs as the user "wbsearch".
#
# With OPENSEARCH_SECURITY=demo it runs a second, secured node for tests of the security model:
# OpenSearch 3.4.0 plus the security plugin (org.opensearch.plugin:opensearch-security:
# <version>.0, zip, also from Maven Central) with the plugin's demo configuration: HTTPS with the
# demo certificates (`ca` prints the demo root CA's path), the internal user "admin" with
# password $OPENSEARCH_ADMIN_PASSWORD, and the user "workbench" allowed to impersonate any user
# over REST (header opendistro_security_impersonate_as). Everything lives apart from the plain
# node: $WORKBENCH_HOME/opensearch-secure, port 9250, logs under opensearch-secure*. The users
# and roles the tests use are set up by tests/support/secure_cluster.py. The plugin zip is fitted
# to the integ-test distribution, which lacks a module it extends (see without_rule_framework).
# A test node on loopback only: the demo certificates and the default password are public.
#
# With OPENSEARCH_PLUGINS=vector it runs a third node with the k-NN and neural-search plugins
# (org.opensearch.plugin:opensearch-knn and :neural-search, <version>.0, zip, from Maven Central),
# whose mappings take knn_vector and sparse_vector fields: the tests of vector fields in LLM
# prompts use it. Port 9270, $WORKBENCH_HOME/opensearch-vector, logs under opensearch-vector*.
# Maven Central's k-NN zip has no native engines: index knn_vector fields with the lucene
# engine, or store them unindexed ("index.knn" unset), as the tests do.
#
# Settings (environment):
#   OPENSEARCH_SECURITY        empty (plain node) or "demo" (secured node)
#   OPENSEARCH_PLUGINS         empty or "vector" (k-NN and neural-search; not with demo)
#   OPENSEARCH_VERSION         version to run (plain: newest 3.x if a JDK >= 21 is under
#                              /usr/lib/jvm, else newest 2.19.x; demo: 3.4.0; vector: 3.6.0)
#   OPENSEARCH_PORT            HTTP port (plain 9200, demo 9250, vector 9270); transport uses
#                              it + 100
#   OPENSEARCH_HEAP            JVM heap (plain 2g, demo and vector 1g)
#   OPENSEARCH_ADMIN_PASSWORD  demo: the admin's password (default Wb-Loopback-9Node!), set
#                              when the demo configuration is installed, at the first start (to
#                              change it, delete $WORKBENCH_HOME/opensearch-secure); the installer
#                              refuses weak ones and ones resembling "admin"
#   MAVEN_REPO_URL             Maven repository (default https://repo1.maven.org/maven2)
# Logs: $WORKBENCH_HOME/logs/opensearch/opensearch.log (node) and
#       $WORKBENCH_HOME/logs/opensearch-console.log (start-up output); the demo node's in
#       $WORKBENCH_HOME/logs/opensearch-secure/ and opensearch-secure-console.log.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SECURITY="${OPENSEARCH_SECURITY:-}"
PLUGINS="${OPENSEARCH_PLUGINS:-}"
case "$PLUGINS" in
  "") ;;
  vector) [ -z "$SECURITY" ] || die "OPENSEARCH_PLUGINS=vector runs a plain node: unset OPENSEARCH_SECURITY" ;;
  *) die "OPENSEARCH_PLUGINS must be empty or \"vector\", not \"$PLUGINS\"" ;;
esac
MAVEN_REPO_URL="${MAVEN_REPO_URL:-https://repo1.maven.org/maven2}"
NODE_USER=wbsearch
PID_PATTERN=org.opensearch.bootstrap.OpenSearch
GROUP_PATH="org/opensearch/distribution/integ-test-zip/opensearch"
case "$SECURITY" in
  "")
    PORT="${OPENSEARCH_PORT:-9200}"
    HEAP="${OPENSEARCH_HEAP:-2g}"
    NAME=opensearch
    URL="http://127.0.0.1:$PORT"
    CURL=(curl -fsS)
    DEFAULT_VERSION=""
    if [ "$PLUGINS" = vector ]; then
      PORT="${OPENSEARCH_PORT:-9270}"
      HEAP="${OPENSEARCH_HEAP:-1g}"
      NAME=opensearch-vector
      URL="http://127.0.0.1:$PORT"
      # The newest release whose k-NN and neural-search zips Maven Central holds when this
      # was written (its metadata lists neither: they are fetched by exact version).
      DEFAULT_VERSION=3.6.0
    fi
    ;;
  demo)
    PORT="${OPENSEARCH_PORT:-9250}"
    HEAP="${OPENSEARCH_HEAP:-1g}"
    NAME=opensearch-secure
    URL="https://127.0.0.1:$PORT"
    ADMIN_PASSWORD="${OPENSEARCH_ADMIN_PASSWORD:-Wb-Loopback-9Node!}"
    # The demo certificates' root CA is checked by clients that want to; curl need not.
    CURL=(curl -fsS -k -u "admin:$ADMIN_PASSWORD")
    # The only release whose security plugin Maven Central holds when this was written.
    DEFAULT_VERSION=3.4.0
    ;;
  *) die "OPENSEARCH_SECURITY must be empty or \"demo\", not \"$SECURITY\"" ;;
esac
OS_HOME="$WORKBENCH_HOME/$NAME"
PID_FILE="$RUN_DIR/$NAME.pid"
NODE_LOG_DIR="$LOG_DIR/$NAME"
CONSOLE_LOG="$LOG_DIR/$NAME-console.log"

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
  "${CURL[@]}" --max-time 3 "$URL/" 2>/dev/null | grep -q '"distribution" : "opensearch"\|"number"'
}

# mvn_copy ARTIFACT DIR: fetch groupId:artifactId:version:packaging into DIR with mvn.
mvn_copy() {
  say "fetching $1 with mvn"
  mvn -B -q \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
    -Dartifact="$1" -DoutputDirectory="$2" >&2
}

download() {
  local version=$1 dist="$OS_HOME/dist/opensearch-$version" tmp
  if [ -x "$dist/bin/opensearch" ]; then echo "$dist"; return; fi
  tmp=$(mktemp -d)
  mvn_copy "org.opensearch.distribution.integ-test-zip:opensearch:$version:zip" "$tmp" \
    || die "mvn could not resolve the OpenSearch $version integ-test distribution"
  mkdir -p "$OS_HOME/dist"
  (cd "$tmp" && unzip -q "opensearch-$version.zip")
  rm -rf "$dist"
  mv "$tmp/opensearch-$version" "$dist"
  rm -rf "$tmp"
  echo "$dist"
}

# without_rule_framework ZIP JDK: fit the security plugin's ZIP to the integ-test distribution,
# which lacks the module "rule-framework" (modules/autotagging-commons of the full distribution,
# published nowhere on its own). The plugin extends it only to offer principal attributes to
# workload-management rules, but also takes commons-collections4 from it: drop it from the
# descriptor's extended.plugins and add commons-collections4 (Maven Central) to the zip.
without_rule_framework() {
  local zip=$1 jdk=$2 tmp
  unzip -p "$zip" plugin-descriptor.properties | grep -q '^extended\.plugins=.*rule-framework' || return 0
  say "the integ-test distribution has no rule-framework module: fitting the security plugin"
  tmp=$(mktemp -d)
  (cd "$tmp" && unzip -q "$zip" plugin-descriptor.properties)
  sed -i -e '/^extended\.plugins=/s/,\?rule-framework//' -e '/^extended\.plugins=/s/=,/=/' \
    "$tmp/plugin-descriptor.properties"
  if ! unzip -l "$zip" | grep -q 'commons-collections4-'; then
    mvn_copy org.apache.commons:commons-collections4:4.4:jar "$tmp" \
      || die "mvn could not resolve commons-collections4 4.4"
  fi
  (cd "$tmp" && "$jdk/bin/jar" --update --no-manifest --file "$zip" ./*)
  rm -rf "$tmp"
}

# add_modules DIST VERSION: the modules the workbench needs that some integ-test distributions
# (3.4.0) leave out: lang-painless (scripted updates) and reindex (update/delete by query),
# assembled from their jars on Maven Central (org.opensearch.plugin:lang-painless and
# reindex-client, and their dependencies) with the descriptors and policies the full
# distribution ships.
add_modules() {
  local dist=$1 version=$2 tmp module jars
  [ -d "$dist/modules/lang-painless" ] && [ -d "$dist/modules/reindex" ] && return 0
  say "the integ-test distribution has no lang-painless/reindex modules: assembling them"
  tmp=$(mktemp -d)
  cat >"$tmp/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>workbench</groupId><artifactId>modules</artifactId><version>1</version><dependencies>
<dependency><groupId>org.opensearch.plugin</groupId><artifactId>lang-painless</artifactId>
<version>$version</version></dependency>
<dependency><groupId>org.opensearch.plugin</groupId><artifactId>reindex-client</artifactId>
<version>$version</version></dependency></dependencies></project>
POM
  (cd "$tmp" && mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory=jars >&2) \
    || { rm -rf "$tmp"; die "mvn could not resolve the lang-painless/reindex $version jars"; }
  for module in lang-painless reindex; do
    case $module in
      lang-painless)
        jars="lang-painless-* antlr4-runtime-* asm-* opensearch-scripting-painless-spi-*" ;;
      reindex)
        jars="reindex-client-* commons-codec-* commons-logging-* httpclient5-* httpcore5-*
              opensearch-rest-client-* opensearch-ssl-config-* slf4j-api-*" ;;
    esac
    rm -rf "$dist/modules/$module" && mkdir -p "$dist/modules/$module"
    (cd "$tmp/jars" && cp $jars "$dist/modules/$module/")
  done
  printf '%s\n' "description=Painless scripting" "version=$version" "name=lang-painless" \
    "classname=org.opensearch.painless.PainlessModulePlugin" "java.version=21" \
    "opensearch.version=$version" "custom.foldername=" "extended.plugins=" \
    "has.native.controller=false" >"$dist/modules/lang-painless/plugin-descriptor.properties"
  printf '%s\n' 'grant {' '  permission java.lang.RuntimePermission "createClassLoader";' \
    '  permission java.lang.RuntimePermission "getClassLoader";' '};' \
    >"$dist/modules/lang-painless/plugin-security.policy"
  printf '%s\n' "description=Reindex, update and delete by query" "version=$version" \
    "name=reindex" "classname=org.opensearch.index.reindex.ReindexModulePlugin" \
    "java.version=21" "opensearch.version=$version" "custom.foldername=" "extended.plugins=" \
    "has.native.controller=false" >"$dist/modules/reindex/plugin-descriptor.properties"
  printf '%s\n' 'grant {' '  permission java.net.SocketPermission "*", "connect";' '};' \
    'grant codeBase "${codebase.opensearch-rest-client}" {' \
    '  permission java.net.NetPermission "getProxySelector";' '};' \
    >"$dist/modules/reindex/plugin-security.policy"
  rm -rf "$tmp"
}

# install_security DIST VERSION JDK: the security plugin and its demo configuration (HTTPS, demo
# certificates, admin password), and the workbench's REST impersonation; each step once.
install_security() {
  local dist=$1 version=$2 jdk=$3 tmp yml="$1/config/opensearch.yml"
  if [ ! -d "$dist/plugins/opensearch-security" ]; then
    tmp=$(mktemp -d)
    mvn_copy "org.opensearch.plugin:opensearch-security:$version.0:zip" "$tmp" \
      || die "mvn could not resolve the security plugin $version.0"
    without_rule_framework "$tmp/opensearch-security-$version.0.zip" "$jdk"
    say "installing the security plugin $version.0"
    OPENSEARCH_JAVA_HOME="$jdk" "$dist/bin/opensearch-plugin" install --batch \
      "file://$tmp/opensearch-security-$version.0.zip" >"$CONSOLE_LOG" 2>&1 \
      || { rm -rf "$tmp"; failed "could not install the security plugin"; }
    rm -rf "$tmp"
  fi
  if ! grep -q "OpenSearch Security Demo Configuration" "$yml"; then
    say "installing the security plugin's demo configuration"
    # -y answers the installer's questions (not cluster mode: no binding to all interfaces),
    # -i initialises the security index from config/opensearch-security on first start. The
    # installer hides its own errors (2>/dev/null inside), so its output goes to the log.
    OPENSEARCH_JAVA_HOME="$jdk" OPENSEARCH_INITIAL_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
      bash "$dist/plugins/opensearch-security/tools/install_demo_configuration.sh" -y -i -s \
      >"$CONSOLE_LOG" 2>&1 </dev/null \
      || failed "the security plugin's demo configuration did not install (a weak OPENSEARCH_ADMIN_PASSWORD?)"
  fi
  if ! grep -q "^plugins.security.authcz.rest_impersonation_user:" "$yml"; then
    printf '%s\n' "" "# The workbench's service identity runs jobs as their creators." \
      "plugins.security.authcz.rest_impersonation_user:" '  workbench: ["*"]' >>"$yml"
  fi
}

# install_vector_plugins DIST VERSION JDK: k-NN, then neural-search (which extends it), once.
install_vector_plugins() {
  local dist=$1 version=$2 jdk=$3 tmp plugin artifact
  for plugin in opensearch-knn:opensearch-knn opensearch-neural-search:neural-search; do
    artifact=${plugin#*:}
    [ -d "$dist/plugins/${plugin%%:*}" ] && continue
    tmp=$(mktemp -d)
    mvn_copy "org.opensearch.plugin:$artifact:$version.0:zip" "$tmp" \
      || { rm -rf "$tmp"; die "mvn could not resolve the $artifact plugin $version.0"; }
    say "installing the $artifact plugin $version.0"
    OPENSEARCH_JAVA_HOME="$jdk" "$dist/bin/opensearch-plugin" install --batch \
      "file://$tmp/$artifact-$version.0.zip" >"$CONSOLE_LOG" 2>&1 \
      || { rm -rf "$tmp"; failed "could not install the $artifact plugin"; }
    rm -rf "$tmp"
  done
}

# failed MESSAGE: stop with MESSAGE after showing the node's logs.
failed() {
  show_log "$CONSOLE_LOG" "$NODE_LOG_DIR/$NAME.log"
  die "$1; logs: $CONSOLE_LOG, $NODE_LOG_DIR/$NAME.log"
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
    version="${OPENSEARCH_VERSION:-${DEFAULT_VERSION:-$(pick_version "$major")}}"
    if [[ "$version" == 3.* ]] && [ "$major" -lt 21 ]; then
      die "OpenSearch $version needs JDK 21+, the newest under /usr/lib/jvm is $major"
    fi
    dist=$(download "$version")
    if [ "$SECURITY" = demo ]; then
      add_modules "$dist" "$version"
      install_security "$dist" "$version" "$jdk"
    fi
    [ "$PLUGINS" != vector ] || install_vector_plugins "$dist" "$version" "$jdk"
    ensure_user
    mkdir -p "$OS_HOME/data" "$NODE_LOG_DIR"
    if [ "$(id -u)" = 0 ]; then
      chown -R "$NODE_USER" "$dist" "$OS_HOME/data" "$NODE_LOG_DIR"
      chown "$NODE_USER" "$RUN_DIR"
    fi
    # A pid file left by a node that is gone (a previous boot, a kill -9) would read as "exited".
    rm -f "$PID_FILE"
    say "starting OpenSearch $version on $URL with $jdk (JDK $major)"
    local cmd=(
      env OPENSEARCH_JAVA_HOME="$jdk" OPENSEARCH_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP"
      "$dist/bin/opensearch" -d -p "$PID_FILE"
      -Ecluster.name="$NAME" -Enode.name=workbench-node
      -Ediscovery.type=single-node -Enetwork.host=127.0.0.1
      -Ehttp.port="$PORT" -Etransport.port="$((PORT + 100))"
      -Epath.data="$OS_HOME/data" -Epath.logs="$NODE_LOG_DIR"
      -Ecluster.routing.allocation.disk.threshold_enabled=false
      # The parent circuit breaker by accounted memory, not by the heap in use: on this small
      # heap G1 lets garbage fill the young generation between collections, and the real-memory
      # breaker then refuses requests (429) that the accounted memory allows.
      -Eindices.breaker.total.use_real_memory=false
    )
    if [ "$(id -u)" = 0 ]; then
      runuser -u "$NODE_USER" -- "${cmd[@]}" >"$CONSOLE_LOG" 2>&1 </dev/null \
        || failed "OpenSearch failed to start"
    else
      "${cmd[@]}" >"$CONSOLE_LOG" 2>&1 </dev/null \
        || failed "OpenSearch failed to start"
    fi
  fi
  local i seen=""
  for i in $(seq 180); do
    if "${CURL[@]}" --max-time 3 "$URL/_cluster/health?wait_for_status=yellow&timeout=1s" >/dev/null 2>&1; then
      say "OpenSearch is healthy at $URL (log: $NODE_LOG_DIR/$NAME.log)"
      echo "$URL"
      return 0
    fi
    # The pid file appears once the daemon has forked, and goes when the node exits (as when it
    # cannot bind its ports): one seen whose process is gone, or seen and gone, means it died.
    [ ! -f "$PID_FILE" ] || seen=1
    if [ -n "$seen" ] && ! pid_alive "$PID_FILE" "$PID_PATTERN"; then
      failed "OpenSearch exited"
    fi
    sleep 1
  done
  failed "OpenSearch did not become healthy in 180 s"
}

status() {
  if responding; then
    "${CURL[@]}" "$URL/_cluster/health?pretty" 2>/dev/null | sed -n 's/.*"\(status\|cluster_name\)".*: "\(.*\)".*/\1: \2/p'
    echo "url: $URL"
    pid_alive "$PID_FILE" "$PID_PATTERN" && echo "pid: $(cat "$PID_FILE")" || echo "pid: (not started by this script)"
  else
    echo "OpenSearch is not running at $URL"
    return 3
  fi
}

# ca: the demo root CA that signed the secured node's certificate, for clients that verify it.
ca() {
  [ "$SECURITY" = demo ] || die "the plain node speaks http: no CA (set OPENSEARCH_SECURITY=demo)"
  local file="$OS_HOME/dist/opensearch-${OPENSEARCH_VERSION:-$DEFAULT_VERSION}/config/root-ca.pem"
  [ -f "$file" ] || die "no demo root CA at $file yet: run start first"
  echo "$file"
}

case "${1:-}" in
  start) start ;;
  stop) stop_pid "$PID_FILE" OpenSearch "$PID_PATTERN" ;;
  status) status ;;
  url) echo "$URL" ;;
  ca) ca ;;
  *) echo "usage: $0 start|stop|status|url|ca" >&2; exit 2 ;;
esac
