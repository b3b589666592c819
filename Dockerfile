# The workbench's container image: one image for the API (`serve`, the default), the job workers
# (`worker`), the scheduler (`scheduler`) and the one-off commands (`init-indices`, `config`...).
# docs/deployment.md ("The container image") says how to build and run it.
#
#   docker build -t workbench .
#   scripts/image.sh build        # podman, on a Debian base made from Debian's packages
#
# BASE_IMAGE is any Debian 12 (bookworm) image: the stock Python image by default, or a bare one
# (`mmdebstrap --variant=minbase bookworm`, as scripts/image.sh makes it where no registry is
# reachable), in which scripts/install.sh installs Debian's python3 and python3-venv itself. The
# build stage runs the project's own installer, so building on the bare base is also the test
# that the scripts work on a minimal Debian.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# Where pip keeps its downloads (a cache mount here; scripts/image.sh mounts the host's pip cache
# instead and names it), and a CA bundle for pip where a proxy re-signs TLS. PIP_CERT has no
# default on purpose: not given, it stays unset (an empty one would turn pip's checks off).
ARG PIP_CACHE_DIR=/root/.cache/pip
ARG PIP_CERT
ENV WORKBENCH_HOME=/tmp/workbench-build PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_WARN_SCRIPT_LOCATION=1
WORKDIR /src
# The dependencies first, at the lock's versions: a change of code does not install them again.
COPY pyproject.toml ./
COPY scripts/lib.sh scripts/install.sh scripts/requirements.lock scripts/
RUN --mount=type=cache,target=/root/.cache/pip \
    scripts/install.sh --venv /opt/workbench --deps-only
# Then the workbench itself, as a copy (not linked to /src, which the runtime stage leaves out).
COPY README.md ./
COPY workbench workbench
RUN --mount=type=cache,target=/root/.cache/pip \
    scripts/install.sh --venv /opt/workbench --no-editable

FROM ${BASE_IMAGE}
# Debian's haproxy (the front of `workbench serve`, docs/front.md), the CA certificates for a
# cluster or model provider over TLS, and Debian's python3 where the base has no Python 3.11.
RUN set -eu; \
    packages="haproxy ca-certificates"; \
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
      || packages="$packages python3"; \
    apt-get update -qq; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages \
      >/dev/null; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    echo 'workbench:x:10001:10001:workbench:/home/workbench:/usr/sbin/nologin' >>/etc/passwd; \
    echo 'workbench:x:10001:' >>/etc/group; \
    mkdir -p /home/workbench; \
    chown 10001:10001 /home/workbench

COPY --from=build /opt/workbench /opt/workbench
COPY index_mappings /opt/workbench/index_mappings

# Every setting is an environment variable (docs/configuration.md); the image sets only where it
# listens and where its index mappings are. No secret is baked in: WORKBENCH_SECRET_KEY, cluster
# credentials and model keys come from the container's environment.
ENV PATH=/opt/workbench/bin:$PATH \
    WORKBENCH_HOST=0.0.0.0 \
    WORKBENCH_INDEX_MAPPINGS_DIR=/opt/workbench/index_mappings \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/workbench
USER 10001:10001
WORKDIR /home/workbench
# matplotlib's font list, made once here rather than by every process at its first start
RUN python -c 'import matplotlib.font_manager'
EXPOSE 9400
# healthy by what the container runs: the API answers, a worker's job consumer runs
# (workbench/cli/healthcheck.py)
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["workbench", "healthcheck"]
ENTRYPOINT ["workbench"]
CMD ["serve"]
