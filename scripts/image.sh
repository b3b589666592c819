#!/usr/bin/env bash
# The workbench's container image with podman, on a machine without a Docker engine or a
# reachable image registry: build | base | name | podman ARGS... | clean.
#
#   build        make the Debian base if missing, build the image from the Dockerfile unless an
#                image of this tree exists already, print its name (localhost/workbench:<hash>)
#   base         make the Debian base only: `mmdebstrap --variant=minbase bookworm` from Debian's
#                packages, imported as localhost/debian:bookworm (20 to 80 s, once)
#   name         the image name this tree builds, without building it
#   podman ARGS  run podman with this script's settings (what the tests run containers with)
#   clean        remove every image and container of the script's storage
#   tools        install podman, mmdebstrap and runc only (what every other command does first)
#
# Podman, mmdebstrap and runc come from Debian's packages when missing. Three of podman's
# defaults fail on these machines and are changed in ONE place, the containers.conf written
# below (exported as CONTAINERS_CONF to every podman this script runs): runc instead of crun
# (crun refuses cgroups in hybrid mode), the cgroupfs manager (no systemd), and explicit
# ulimits (podman's defaults, nofile and nproc of 1048576, are over what setrlimit may set here
# and the container does not start): the caller's hard limits, at most 65536 open files and
# 8192 processes (on these machines nproc above about 32768 was refused too, below the hard
# limit). Logs go to files (no journald). The same settings hold for the builds' RUN steps.
#
# What is cached, and why it is cheap: podman's whole storage lives under
# $WORKBENCH_HOME/containers (storage.conf, exported as CONTAINERS_STORAGE_CONF), so the base,
# the image and every build layer survive between runs with no save or load of a tar. The tag is
# a hash of what the image is built from (the Dockerfile, .dockerignore, pyproject.toml, the
# lock, the installer scripts, the sources and index_mappings): an unchanged tree is not built
# again at all, and a change of code rebuilds only the layers from its COPY on, since the
# dependencies are installed in a layer of their own (the Dockerfile); only a change of the lock,
# pyproject.toml, the installers or the Dockerfile installs them again. The host's pip cache is
# mounted into the build, so what the host's pip keeps (the wheels it built from source, and the
# downloads an index lets it cache) is not fetched or built again.
#
# Settings (environment):
#   WORKBENCH_IMAGE  repository of the image (default localhost/workbench)
# Log of the last build: $WORKBENCH_HOME/logs/image-build.log

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# The checkout itself, through any symlink to scripts/ (the docs' examples run from a folder
# that links to it): what the image is built from and hashed.
REPO_ROOT=$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

IMAGE="${WORKBENCH_IMAGE:-localhost/workbench}"
BASE=localhost/debian:bookworm
STORE="$WORKBENCH_HOME/containers"
export CONTAINERS_CONF="$STORE/containers.conf"
export CONTAINERS_STORAGE_CONF="$STORE/storage.conf"

# configure: podman's settings for this machine, written on every call (the limits are the
# caller's), and its storage under $WORKBENCH_HOME.
configure() {
  local nofile nproc run
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  { [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; } && nofile=65536
  { [ "$nproc" = unlimited ] || [ "$nproc" -gt 8192 ]; } && nproc=8192
  mkdir -p "$STORE/storage"
  # podman's run-time state, one folder per storage (another $WORKBENCH_HOME has its own)
  run="${XDG_RUNTIME_DIR:-/run}/workbench-containers-$(printf '%s' "$STORE" | sha256sum | cut -c1-8)"
  cat >"$CONTAINERS_CONF.tmp" <<EOF
# Written by scripts/image.sh: podman's settings for the workbench's images and tests.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  mv "$CONTAINERS_CONF.tmp" "$CONTAINERS_CONF"
  cat >"$CONTAINERS_STORAGE_CONF.tmp" <<EOF
# Written by scripts/image.sh: podman's storage for the workbench's images, kept between runs.
[storage]
driver = "overlay"
graphroot = "$STORE/storage"
runroot = "$run"
EOF
  mv "$CONTAINERS_STORAGE_CONF.tmp" "$CONTAINERS_STORAGE_CONF"
}

# ensure_tools: Debian's podman, mmdebstrap and runc when missing.
ensure_tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v runc >/dev/null || [ -x /usr/sbin/runc ] || missing+=(runc)
  [ ${#missing[@]} -eq 0 ] || apt_install "the container image and its tests" "${missing[@]}" \
    || die "could not install ${missing[*]}"
}

run_podman() { podman "$@"; }

# base: localhost/debian:bookworm, made once from Debian's packages.
base() {
  run_podman image exists "$BASE" && return 0
  local tar="$STORE/debian-bookworm.tar" started=$SECONDS
  say "making the Debian base $BASE (mmdebstrap --variant=minbase bookworm)"
  mmdebstrap --variant=minbase bookworm "$tar" >"$LOG_DIR/image-base.log" 2>&1 \
    || { show_log "$LOG_DIR/image-base.log"; die "mmdebstrap failed"; }
  run_podman import "$tar" "$BASE" >/dev/null || die "podman import failed"
  rm -f "$tar"
  say "made $BASE in $((SECONDS - started)) s"
}

# tree_hash: what the image is built from (.dockerignore's allow-list), as one hash.
tree_hash() {
  cd "$REPO_ROOT"
  {
    sha256sum Dockerfile .dockerignore pyproject.toml README.md scripts/lib.sh \
      scripts/install.sh scripts/requirements.lock
    find workbench index_mappings -type f ! -name '*.pyc' ! -name '*.pyo' \
      ! -path '*/__pycache__/*' ! -path '*.egg-info/*' -print0 | LC_ALL=C sort -z \
      | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

name() { echo "$IMAGE:$(tree_hash)"; }

# build_args: the host's pip cache mounted into the build, and the CA bundle the host's pip
# trusts where it names one (a proxy that re-signs TLS); the build shares the host's network,
# which reaches PyPI and Debian's mirror.
build_args() {
  local cache cert
  cache="${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}"
  mkdir -p "$cache"
  printf '%s\n' --network=host --format=docker --layers \
    -v "$cache:/host-pip-cache" --build-arg PIP_CACHE_DIR=/host-pip-cache
  cert="${PIP_CERT:-}"
  if [ -z "$cert" ] && [ -x "$REPO_ROOT/.venv/bin/python" ]; then
    cert=$("$REPO_ROOT/.venv/bin/python" -m pip config get global.cert 2>/dev/null || true)
  fi
  if [ -n "$cert" ] && [ -f "$cert" ]; then
    printf '%s\n' -v "$cert:/host-ca.pem:ro" --build-arg PIP_CERT=/host-ca.pem
  fi
}

build() {
  local image started size old
  # One build at a time: a second caller (CI starts one in the background; the tests' fixture
  # asks too) waits for the first and then finds its image.
  exec 9>"$STORE/build.lock"
  flock 9
  image=$(name)
  if run_podman image exists "$image"; then
    say "$image is built already (nothing changed)"
    echo "$image"
    return 0
  fi
  base
  started=$SECONDS
  say "building $image on $BASE (log: $LOG_DIR/image-build.log)"
  mapfile -t args < <(build_args)
  if ! run_podman build "${args[@]}" --build-arg "BASE_IMAGE=$BASE" -t "$image" \
       -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT" >"$LOG_DIR/image-build.log" 2>&1; then
    show_log "$LOG_DIR/image-build.log"
    die "podman build failed; see $LOG_DIR/image-build.log"
  fi
  size=$(run_podman image inspect --format '{{.Size}}' "$image")
  say "built $image in $((SECONDS - started)) s; size $((size / 1000000)) MB"
  # Earlier builds of this repository name are dropped (their shared layers stay, as the cache).
  for old in $(run_podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$IMAGE"); do
    [ "$old" = "$image" ] || run_podman rmi "$old" >/dev/null 2>&1 || true
  done
  echo "$image"
}

clean() {
  run_podman rm -a -f >/dev/null 2>&1 || true
  run_podman rmi -a -f >/dev/null 2>&1 || true
  say "removed every container and image of $STORE"
}

ensure_tools
configure
case "${1:-}" in
  build) build ;;
  base) base ;;
  name) name ;;
  podman) shift; exec podman "$@" ;;
  clean) clean ;;
  tools) ;;
  *) echo "usage: $0 build|base|name|podman ARGS...|clean|tools" >&2; exit 2 ;;
esac
