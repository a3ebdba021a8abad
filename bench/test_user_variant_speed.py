"""CPU tests of user_variant_speed.py (no torch, no GPU): its exact pair counts against a brute-force mask, the
verdicts, the argument checks and dry run, and every snippet it times compiled by `attnjit prewarm --variant`
for sm_90a with the declaration the script checks its Variants against:
  build/venv/bin/python -m pytest -q bench/test_user_variant_speed.py"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import user_variant_speed as uvs  # noqa: E402

DRIVER = os.path.join(HERE, "user_variant_speed.py")
CLI = os.path.join(HERE, "..", "build", "attnjit")


def brute_pairs(n, allowed):
    """Pairs (q, kv) the mask keeps, counted one by one (plain Python: CI's venv has no numpy)."""
    return sum(1 for q in range(n) for kv in range(n) if allowed(q, kv))


@pytest.mark.parametrize("n", [1, 2, 7, 130, 257])
def test_causal_and_window_pairs_match_the_mask(n):
    assert uvs.causal_pairs(n) == brute_pairs(n, lambda q, kv: kv <= q)
    for w in (0, 1, 5, 64, 300):
        assert uvs.window_pairs(n, w) == brute_pairs(n, lambda q, kv: kv <= q and q - kv <= w), (n, w)


def test_document_lengths_are_fixed_uneven_and_cover_the_tokens():
    lengths = uvs.document_lengths(16384, 8)
    assert lengths == uvs.document_lengths(16384, 8)  # the same every run
    assert len(lengths) == 8 and sum(lengths) == 16384 and min(lengths) >= 1 and len(set(lengths)) > 1
    assert uvs.document_lengths(5, 5) == [1] * 5
    with pytest.raises(ValueError, match="documents=9; allowed: 1 to tokens"):
        uvs.document_lengths(8, 9)


def test_document_pairs_match_the_packed_mask():
    lengths = uvs.document_lengths(500, 6, seed=3)
    doc = [i for i, length in enumerate(lengths) for _ in range(length)]
    assert uvs.document_pairs(lengths) == brute_pairs(500, lambda q, kv: doc[q] == doc[kv] and kv <= q)


def test_flops_count_allowed_pairs_only():
    assert uvs.attention_flops(10, 16, 128) == 4 * 10 * 16 * 128
    n = uvs.FLEX["tokens"]
    assert uvs.window_pairs(n, uvs.FLEX["window"]) < uvs.causal_pairs(n) < n * n


def test_twin_verdict_is_the_095_speed_target():
    assert uvs.twin_verdict(100.0, 105.0)["meets"]  # 0.952x speed
    miss = uvs.twin_verdict(100.0, 106.0)
    assert not miss["meets"] and miss["time_ratio"] == pytest.approx(1.06) and miss["speed"] == pytest.approx(1 / 1.06)


def test_flex_verdict_is_flex_time_over_each_contender():
    res = {"FlexAttention": {"us": 120.0}, "a": {"us": 100.0}, "b": {"error": "x"}, "c": {"skipped": "y"}}
    assert uvs.flex_verdict(res) == {"a": pytest.approx(1.2)}
    assert uvs.flex_verdict({"a": {"us": 1.0}}) == {}  # no FlexAttention time: no ratios


def test_summary_reads_a_saved_run():
    data = {"device": "H100", "gemm_tflops": 700.0,
            "twins": [{"what": "prefill soft cap", **uvs.twin_verdict(100.0, 120.0), "agrees": False},
                      {"what": "decode", "error": "E"},
                      {"what": "causal", **uvs.twin_verdict(100.0, 200.0),
                       "block_sparse": uvs.twin_verdict(100.0, 101.0)},
                      {"what": "window", **uvs.twin_verdict(100.0, 200.0), "block_sparse": {"skipped": "absent"}}],
            "flex": [{"what": "doc", "speed_vs_flex": {"attnjit built-in": 1.4}, "flex_compile": {"compile_s": 4.6}}],
            "cold_compile": [{"what": "cold decode", "compile_s": 1.2, "limit_s": 1.5, "meets": True},
                             {"what": "cold sparse", "skipped": "no block sparsity"}],
            "errors": {"flex": "boom"}}
    text = uvs.summary(data)
    for words in ("MISSES <= 1.053); OUTPUTS DISAGREE", "decode", "attnjit built-in 1.40x", "Flex compile 4.6 s",
                  "block sparsity >= 1.2x: not measured", "1.20 s (meets <= 1.5 s)", "no block sparsity",
                  "flex FAILED: boom",
                  "time ratio 2.000 (MISSES <= 1.053); block-sparse time ratio 1.010 (meets <= 1.053)",
                  "block-sparse absent"):
        assert words in text, words


def test_dry_run_needs_no_torch_and_prints_the_counts():
    r = subprocess.run([sys.executable, DRIVER, "--dry-run", "--quick"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lengths = uvs.document_lengths(uvs.FLEX["tokens"], uvs.FLEX["documents"])
    assert f"{uvs.document_pairs(lengths)} pairs" in r.stdout
    assert f"{uvs.window_pairs(uvs.FLEX['tokens'], uvs.FLEX['window'])} pairs" in r.stdout
    assert "(quick)" in r.stdout


@pytest.mark.parametrize("args,words", [(["--parts", "twins,gpu"], "--parts=twins,gpu; allowed"),
                                        (["--parts", ","], "allowed: a comma-separated subset"),
                                        (["--cold-timeout", "0"], "--cold-timeout=0; allowed: at least 1")])
def test_bad_arguments_name_the_value_and_what_is_allowed(args, words):
    r = subprocess.run([sys.executable, DRIVER, "--dry-run"] + args, capture_output=True, text=True)
    assert r.returncode == 2 and words in r.stderr


@pytest.mark.skipif(not os.path.exists(CLI), reason="no build/attnjit: build the attnjit_cli target")
@pytest.mark.parametrize("name", sorted(uvs.SNIPPETS))
def test_each_snippet_compiles_with_its_declaration(name, tmp_path):
    """NVRTC compiles the snippet, as declared, into a bf16 batch decode kernel for sm_90a (no GPU needed)."""
    spec = uvs.SNIPPETS[name]
    variant = tmp_path / "variant.json"
    variant.write_text(json.dumps(spec))
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"problems": [{"op": "batch_decode", "num_qo_heads": 32, "num_kv_heads": 8,
                                                  "head_dim": 128, "q_dtype": "bfloat16", "page_size": 16}]}))
    r = subprocess.run([CLI, "prewarm", "--manifest", str(manifest), "--variant", str(variant), "--arch", "sm_90a",
                        "--cache-dir", str(tmp_path / "cache"), "-j", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout and "_user" in r.stdout + r.stderr


@pytest.mark.skipif(not os.path.exists(CLI), reason="no build/attnjit: build the attnjit_cli target")
@pytest.mark.parametrize("name", sorted(n for n, spec in uvs.SNIPPETS.items() if "mask_mod" in spec))
def test_each_mask_snippet_compiles_block_sparse_for_single_prefill(name, tmp_path):
    """The block-sparse form the script makes (block_sparse=True, heads_vary=False): fa3 prefill kernels and the
    block_mask classification kernel for sm_90a."""
    variant = tmp_path / "variant.json"
    variant.write_text(json.dumps(dict(uvs.SNIPPETS[name], block_sparse=True, heads_vary=False)))
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"problems": [{"op": "single_prefill", "num_qo_heads": 16, "num_kv_heads": 16,
                                                  "head_dim": 128, "q_dtype": "bfloat16", "backend": "fa3"}]}))
    r = subprocess.run([CLI, "prewarm", "--manifest", str(manifest), "--variant", str(variant), "--arch", "sm_90a",
                        "--cache-dir", str(tmp_path / "cache"), "-j", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout and "compiled block_mask_user" in r.stdout + r.stderr
