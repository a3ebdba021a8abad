#!/usr/bin/env bash
# Device step: the Catch2 GPU tests, then the Python tests (FlashInfer on the path, so the agreement
# tests run too), then optionally the example notebook from a wheel install. Logs under $OUT.
#   bash tools/gpu/tests.sh                      (DRY_RUN=1 prints the steps; tools/gpu/env.sh sets the rest)
# PARTS: any of "catch2 pytest notebook" (default "catch2 pytest").
# CATCH2: Catch2 test specs (default "[gpu]"); CATCH2_ARGS: more arguments (e.g. "--durations yes");
#   QUICK=0: the full single-decode grid (default 1: ATTNJIT_TEST_QUICK=1); GRID=reduced: ATTNJIT_TEST_GRID;
#   SPLIT=1: all of [gpu] as two processes side by side (catch2_a.log, catch2_b.log; CATCH2 is not read).
# PYTEST_ARGS: pytest's files and options (default tools/python/tests; e.g. "-k decode tools/python/tests",
#   or "-s tools/python/tests/test_transformers_args.py tools/python/tests/test_transformers_integration.py").
# WHEELS: for PARTS=notebook, a folder with the attnjit wheel and its [notebook] extras' wheels: the notebook
#   examples/notebook/attnjit_decode.ipynb runs from a venv that installed them (no internet needed);
#   the executed notebook and its plot come back under $OUT.
# CATCH2_TIMEOUT / PYTEST_TIMEOUT / NOTEBOOK_TIMEOUT: seconds (default 420 / 400 / 900).
set -uo pipefail
source tools/gpu/env.sh
PARTS=${PARTS:-"catch2 pytest"}
status=0
gpu_line

# The prefill-heavy tags, run beside the rest by SPLIT=1: their JIT compiles are CPU-bound and the
# device has 16 cores, so two processes take about half the time of one.
SPLIT_A="[gpu][prefill],[gpu][table_check],[gpu][fa3_ws],[gpu][user_variant],[gpu][d512],[gpu][rope_exact],\
[gpu][fa3_ws_small],[gpu][block_sparse]"
SPLIT_B="[gpu]~[prefill]~[table_check]~[fa3_ws]~[user_variant]~[d512]~[rope_exact]~[fa3_ws_small]~[block_sparse]"

catch2() {  # log name, test spec, extra environment...
  local log=$1 spec=$2
  shift 2
  local env_vars=("$@")
  [ "${QUICK:-1}" = 1 ] && env_vars+=(ATTNJIT_TEST_QUICK=1)
  [ -n "${GRID:-}" ] && env_vars+=("ATTNJIT_TEST_GRID=$GRID")
  # shellcheck disable=SC2086  # CATCH2_ARGS is a list of words
  step "$log" "${CATCH2_TIMEOUT:-420}" env "${env_vars[@]}" "$BIN/attnjit_tests" "$spec" ${CATCH2_ARGS:-}
}

if [[ " $PARTS " == *" catch2 "* ]]; then
  if [ "${SPLIT:-0}" = 1 ]; then
    echo "== Catch2 [gpu] as two processes: $SPLIT_A | $SPLIT_B"
    catch2 catch2_a.log "$SPLIT_A" & a=$!
    catch2 catch2_b.log "$SPLIT_B" ATTNJIT_CACHE_DIR=/tmp/attnjit-cache-split-b & b=$!
    wait $a || status=1
    wait $b || status=1
    show catch2_a.log "FAILED|test cases|assertions|worst|cases within" 30
    show catch2_b.log "FAILED|test cases|assertions|worst|cases within" 30
  else
    echo "== Catch2 ${CATCH2:-[gpu]}"
    catch2 catch2.log "${CATCH2:-[gpu]}" || status=1
    show catch2.log "FAILED|test cases|assertions|worst|cases within" 30
  fi
fi

if [[ " $PARTS " == *" pytest "* ]]; then
  echo "== pytest ${PYTEST_ARGS:-tools/python/tests}"
  # shellcheck disable=SC2086
  step pytest.log "${PYTEST_TIMEOUT:-400}" python3 -m pytest -q -rfE --tb=short -p no:cacheprovider \
    ${PYTEST_ARGS:-tools/python/tests} || status=1
  show pytest.log "attnjit/sdpa|^FAILED|^ERROR|passed|failed" 30
fi

if [[ " $PARTS " == *" notebook "* ]]; then
  echo "== notebook examples/notebook/attnjit_decode.ipynb from the wheels in ${WHEELS:?PARTS=notebook needs WHEELS=<folder of wheels>}"
  venv=/tmp/attnjit-nb-venv
  notebook() {
    # Images without ensurepip get a pip-less venv that the system pip installs into.
    local pip_cmd=("$venv/bin/python" -m pip)
    if ! python3 -m venv --system-site-packages "$venv" 2>/dev/null; then
      rm -rf "$venv"
      python3 -m venv --without-pip --system-site-packages "$venv" || return 1
      pip_cmd=(python3 -m pip --python "$venv/bin/python")
    fi
    # The image's own matplotlib (not a wheel in $WHEELS): then the extra's other packages by name.
    if python3 -c "import matplotlib" 2>/dev/null; then
      "${pip_cmd[@]}" install -q --no-index --find-links "$WHEELS" attnjit nbclient ipykernel || return 1
    else
      "${pip_cmd[@]}" install -q --no-index --find-links "$WHEELS" "attnjit[notebook]" || return 1
    fi
    # From a folder outside the checkout, so `import attnjit` can only mean the installed package.
    local work
    work=$(mktemp -d)
    cp examples/notebook/attnjit_decode.ipynb "$work/"
    (cd "$work" && env -u PYTHONPATH -u ATTNJIT_LIBRARY "$venv/bin/jupyter-execute" --inplace \
      --timeout "${NOTEBOOK_TIMEOUT:-900}" attnjit_decode.ipynb) || return 1
    cp "$work/attnjit_decode.ipynb" "$OUT/"
    cp "$work/decode_bandwidth.png" "$OUT/" 2>/dev/null || true  # the notebook saves its plot where it runs
  }
  if [ -n "${DRY_RUN:-}" ]; then
    echo "would install attnjit[notebook] from $WHEELS into $venv and run jupyter-execute on a copy of the notebook"
  else
    notebook >"$OUT/notebook.log" 2>&1 || status=1
    tail -n 20 "$OUT/notebook.log"
  fi
fi
exit $status
