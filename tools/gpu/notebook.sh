#!/usr/bin/env bash
# One device-machine step: executes examples/notebook/attnjit_decode.ipynb the
# way a notebook user would, from a `pip install "attnjit[notebook]"` into a
# fresh virtual environment (torch from the system site), and brings back the
# executed notebook and its plot, decode_bandwidth.png, under $OUT.
#   WHEELS=<folder with the attnjit wheel and the extras' wheels> bash tools/gpu/notebook.sh
# The GPU machine has no internet, so pip installs from $WHEELS only.
set -euo pipefail
OUT=${OUT:-/tmp/attnjit-out}
WHEELS=${WHEELS:?folder of wheels}
mkdir -p "$OUT"
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache}
venv=/tmp/attnjit-nb-venv
# Images without ensurepip (Debian/Ubuntu without python3-venv) get a pip-less
# venv that the system pip installs into.
if python3 -m venv --system-site-packages "$venv" 2>/dev/null; then
  pip_cmd=("$venv/bin/python" -m pip)
else
  rm -rf "$venv"
  python3 -m venv --without-pip --system-site-packages "$venv"
  pip_cmd=(python3 -m pip --python "$venv/bin/python")
fi
# The image's matplotlib is its own (not a wheel in $WHEELS): the extra's other packages by name.
if python3 -c "import matplotlib" 2>/dev/null; then
  "${pip_cmd[@]}" install -q --no-index --find-links "$WHEELS" attnjit nbclient ipykernel
else
  "${pip_cmd[@]}" install -q --no-index --find-links "$WHEELS" "attnjit[notebook]"
fi
# Run from a folder outside the checkout so `import attnjit` can only mean the installed package.
work=$(mktemp -d)
cp examples/notebook/attnjit_decode.ipynb "$work/"
cd "$work"
"$venv/bin/jupyter-execute" --inplace --timeout 900 attnjit_decode.ipynb 2>&1 | tail -n 20
cp attnjit_decode.ipynb "$OUT/"
# The notebook saves the plot in the folder it runs from.
cp decode_bandwidth.png "$OUT/" 2>/dev/null || true
ls -la "$OUT"
