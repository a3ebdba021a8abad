"""Executes a notebook's code cells in order and saves their outputs into it,
for machines without Jupyter (no internet to install it). Standard library
plus matplotlib only: what the notebook itself needs.

    python3 examples/notebook/run_notebook.py examples/notebook/attnjit_decode.ipynb

Like `jupyter nbconvert --to notebook --execute --inplace`: cells run in one
namespace with the notebook's folder as the working directory; stdout and
stderr become stream outputs, a cell's last expression its execute_result,
matplotlib figures open after a cell image/png outputs (the inline backend's
behaviour), and an exception an error output that stops the run (exit 1,
after saving what ran).
"""
import ast
import base64
import contextlib
import io
import json
import os
import sys
import traceback
import warnings

os.environ.setdefault("MPLBACKEND", "Agg")


def _lines(text):
    return text.splitlines(True)


def _figures():
    """PNG display_data outputs for every open matplotlib figure, closing them."""
    if "matplotlib.pyplot" not in sys.modules:
        return []
    plt = sys.modules["matplotlib.pyplot"]
    out = []
    for num in plt.get_fignums():
        fig = plt.figure(num)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        out.append({"output_type": "display_data", "metadata": {},
                    "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                             "text/plain": [repr(fig)]}})
        plt.close(fig)
    return out


def run_cell(source, namespace, count, filename):
    """Runs one cell; returns (outputs, ok)."""
    out, err = io.StringIO(), io.StringIO()
    outputs, result, ok = [], None, True
    try:
        tree = ast.parse(source, filename)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            # plt.show() on the Agg backend says it cannot show: the figure is captured instead.
            warnings.filterwarnings("ignore", message=".*non-interactive.*cannot be shown")
            exec(compile(tree, filename, "exec"), namespace)
            if last is not None:
                result = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
    except Exception as e:  # the notebook's error, reported like Jupyter does
        ok = False
        tb = traceback.format_exception(type(e), e, e.__traceback__.tb_next)  # from the cell down
        outputs_error = {"output_type": "error", "ename": type(e).__name__, "evalue": str(e), "traceback": tb}
    for name, stream in (("stdout", out), ("stderr", err)):
        if stream.getvalue():
            outputs.append({"output_type": "stream", "name": name, "text": _lines(stream.getvalue())})
    outputs.extend(_figures())
    if result is not None:
        outputs.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                        "data": {"text/plain": _lines(repr(result))}})
    if not ok:
        outputs.append(outputs_error)
    return outputs, ok


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    path = os.path.abspath(argv[1])
    with open(path) as f:
        nb = json.load(f)
    os.chdir(os.path.dirname(path))
    namespace = {"__name__": "__main__"}
    count, ok = 0, True
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        if not ok:  # after an error, later cells keep no stale outputs
            cell["outputs"], cell["execution_count"] = [], None
            continue
        count += 1
        source = "".join(cell["source"])
        print(f"--- cell {count}", flush=True)
        cell["outputs"], ok = run_cell(source, namespace, count, f"<cell {count}>")
        cell["execution_count"] = count
        for o in cell["outputs"]:
            if o["output_type"] == "stream":
                (sys.stdout if o["name"] == "stdout" else sys.stderr).write("".join(o["text"]))
            elif o["output_type"] == "error":
                sys.stderr.write("".join(o["traceback"]))
            elif o["output_type"] == "display_data":
                print("[figure]")
    nb["metadata"].setdefault("language_info", {}).update(name="python", version=sys.version.split()[0])
    with open(path, "w") as f:
        json.dump(nb, f, indent=1)
        f.write("\n")
    print(f"saved {path}" + ("" if ok else " (stopped at an error)"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
