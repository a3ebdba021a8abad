"""CPU tests of fa3_ws_speed.py's table math, argument checks and dry run (no torch, no GPU):
  build/venv/bin/python -m pytest -q bench/test_prefill_speed_table.py"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import prefill_speed_table as tbl  # noqa: E402

DRIVER = os.path.join(HERE, "fa3_ws_speed.py")
CLI = os.path.join(HERE, "..", "build", "attnjit")


def test_shapes_are_the_issues_grid():
    got = {(s.head_dim, s.seqlen, s.batch, s.heads) for s in tbl.SHAPES}
    assert got == {(128, 512, 32, 16), (128, 1024, 16, 16), (128, 4096, 4, 16), (128, 16384, 1, 16),
                   (64, 4096, 4, 32), (256, 4096, 4, 8)}
    assert all(s.seqlen * s.batch == tbl.TOKENS for s in tbl.SHAPES + tbl.QUICK)
    assert set(tbl.QUICK) <= set(tbl.SHAPES)


def test_flops_is_4bhs2d_halved_for_causal():
    s = tbl.Shape(128, 16384, 1)
    assert tbl.flops(s, False) == 4 * 1 * 16 * 16384 ** 2 * 128
    assert tbl.flops(s, True) == tbl.flops(s, False) / 2
    # Every shape of the grid does the same work at a given head dim's heads: 16k tokens x 2048 hidden.
    assert tbl.flops(tbl.Shape(128, 1024, 16), False) * 16 == tbl.flops(s, False)
    assert tbl.input_bytes(s) == 3 * 16384 * 2048 * 2


def test_parse_shapes_and_its_errors():
    assert tbl.parse_shapes("128:4096x4, 64:1024X16") == [tbl.Shape(128, 4096, 4), tbl.Shape(64, 1024, 16)]
    for bad, words in (("128:4096", "D:SEQxBATCH"), ("96:4096x4", "head_dim 96"), ("128:0x4", "at least 1"),
                       ("a:bxc", "D:SEQxBATCH"), (",", "names no shape")):
        with pytest.raises(ValueError, match=words):
            tbl.parse_shapes(bad)


def test_attnjit_problems_single_and_ragged_do_the_same_work():
    s = tbl.Shape(128, 1024, 16)
    ragged = tbl.attnjit_problem(s, True, "fa3_ws")
    single = tbl.attnjit_problem(s, True, "fa3_ws", op="single_prefill")
    assert ragged["batch_size"] * ragged["num_qo_heads"] == single["num_qo_heads"] == 256
    assert ragged["kv_source"] == "ragged" and ragged["backend"] == single["backend"] == "fa3_ws"
    with pytest.raises(ValueError, match="allowed"):
        tbl.attnjit_problem(s, True, "fa3", op="paged")


def _row(results):
    return {"label": "d128 1024x16", "causal": False, "results": results}


def test_summarize_ratios():
    row = tbl.summarize(_row({"attnjit fa3_ws": {"tflops": 630.0}, "attnjit fa3": {"tflops": 500.0},
                              "attnjit fa2": {"tflops": 450.0}, "cuDNN SDPA": {"tflops": 600.0},
                              "flash SDPA": {"tflops": 700.0},  # not part of the bar
                              "FlashInfer fa3": {"tflops": 560.0}, "FlashInfer fa2": {"tflops": 500.0}}), 800.0)
    assert row["attnjit_best"] == "attnjit fa3_ws" and row["best_peer"] == "cuDNN SDPA"
    assert row["best_vs_peer"] == pytest.approx(630 / 600)
    assert row["fa2_vs_flashinfer_fa2"] == pytest.approx(0.9)
    assert row["best_of_gemm"] == pytest.approx(630 / 800)
    assert row["results"]["cuDNN SDPA"]["of_gemm"] == pytest.approx(0.75)


def test_summarize_with_errors_and_missing_peers():
    row = tbl.summarize(_row({"attnjit fa3_ws": {"error": "boom"}, "attnjit fa3": {"tflops": 500.0},
                              "cuDNN SDPA": {"tflops": 400.0}, "FlashInfer fa3": {"error": "not run: build"}}), None)
    assert row["attnjit_best"] == "attnjit fa3" and row["best_vs_peer"] == pytest.approx(1.25)
    assert row["fa2_vs_flashinfer_fa2"] is None and row["best_of_gemm"] is None
    assert "of_gemm" not in row["results"]["attnjit fa3"]
    none = tbl.summarize(_row({"attnjit fa3": {"error": "x"}, "cuDNN SDPA": {"tflops": 1.0}}), 1.0)
    assert none["attnjit_best"] is None and none["best_vs_peer"] is None


def test_table_lines_and_round_trip(tmp_path):
    rows = [tbl.summarize(_row({"attnjit fa3_ws": {"tflops": 640.0}, "cuDNN SDPA": {"tflops": 600.0},
                                "FlashInfer fa3": {"error": "not run: ImportError"},
                                "FlashInfer fa2": {"skipped": "head dim not in --flashinfer-head-dims"}}), 800.0)]
    text = tbl.table(rows, 800.0)
    line = next(ln for ln in text.splitlines() if ln.startswith("d128 1024x16") and "640.0" in ln)
    assert line.split()[-4:] == ["-", "fa3_ws", "1.067", "-"]
    fractions = next(ln for ln in text.splitlines() if ln.startswith("d128 1024x16") and "640.0" not in ln)
    assert fractions.split()[-4:] == ["0.800", "0.750", "-", "-"]  # fractions of the GEMM rate
    assert "FlashInfer fa3: not run: ImportError" in text and "skipped" not in text and "fa2:" not in text
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"gemm_tflops": 800.0, "rows": [{k: v for k, v in rows[0].items()
                                                               if k in ("label", "causal", "results")}]}))
    assert tbl.table_from_json(str(path)) == text


def _driver(*args):
    return subprocess.run([sys.executable, DRIVER, *args], capture_output=True, text=True, timeout=300)


def test_dry_run_plan_without_cli():
    r = _driver("--dry-run", "--quick", "--cli", "/nonexistent/attnjit")
    assert r.returncode == 0, r.stderr
    assert "d128 1024x16" in r.stdout and "d128 16384x1" in r.stdout and "d64" not in r.stdout
    assert "12 attnjit problems (not checked" in r.stdout
    for name in tbl.CONTENDERS:
        assert name in r.stdout


@pytest.mark.parametrize("args, words", [(["--shapes", "96:4096x4"], "head_dim 96"),
                                         (["--flashinfer-head-dims", "32"], "--flashinfer-head-dims=32"),
                                         (["--iters", "0"], "--iters=0")])
def test_bad_arguments_are_named(args, words):
    r = _driver("--dry-run", *args)
    assert r.returncode == 2 and words in r.stderr


@pytest.mark.skipif(not os.path.exists(CLI), reason="no build/attnjit: the problems' check by `explain` needs it")
@pytest.mark.parametrize("op", ["batch_prefill", "single_prefill"])
def test_dry_run_problems_are_accepted_by_the_cli(op):
    r = _driver("--dry-run", "--cli", CLI, "--attnjit-op", op)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "REFUSED" not in r.stdout and r.stdout.count("prefill_fa3ws_") == 12
