"""The installed package (`pip install .`): imported from site-packages with
its own libattnjit.so, and the CLI reachable as `attnjit` and
`python -m attnjit`. Runs only with ATTNJIT_TEST_INSTALLED=1 (see conftest.py),
which tools/setup/test.sh sets after installing the wheel into a venv.
"""

import os
import shutil
import subprocess
import sys

import pytest

import attnjit
from attnjit import _library
from attnjit.__main__ import cli_path

pytestmark = pytest.mark.skipif(os.environ.get("ATTNJIT_TEST_INSTALLED") != "1",
                                reason="tests the installed package; set ATTNJIT_TEST_INSTALLED=1 after pip install")

_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _package_dir():
    return os.path.dirname(os.path.abspath(attnjit.__file__))


def test_the_package_comes_from_the_install_not_the_checkout():
    source = os.path.join(_CHECKOUT, "tools", "python", "attnjit")
    assert os.path.realpath(_package_dir()) != os.path.realpath(source), attnjit.__file__
    assert os.path.basename(os.path.dirname(_package_dir())) in ("site-packages", "dist-packages"), attnjit.__file__


def test_the_library_is_the_packaged_copy_even_with_ATTNJIT_LIBRARY_set(monkeypatch):
    monkeypatch.setenv("ATTNJIT_LIBRARY", "/nonexistent/libattnjit.so")
    with pytest.warns(UserWarning, match="ATTNJIT_LIBRARY=/nonexistent/libattnjit.so is ignored"):
        candidates = _library._candidates()
    assert candidates == [os.path.join(_package_dir(), "libattnjit.so")]
    assert os.path.realpath(_library.lib()._name) == os.path.realpath(candidates[0])
    assert attnjit.version().count(".") == 2


def test_import_works_from_any_folder_with_no_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTNJIT_", "PYTHON"))}
    out = subprocess.run([sys.executable, "-c", "import attnjit; print(attnjit.version())"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == attnjit.version()


def test_the_cli_is_packaged_and_runs_as_attnjit_and_python_dash_m(tmp_path):
    assert cli_path() == os.path.join(_package_dir(), "bin", "attnjit")
    expected = f"attnjit {attnjit.version()}"
    via_module = subprocess.run([sys.executable, "-m", "attnjit", "--version"], cwd=tmp_path, capture_output=True,
                                text=True, check=True)
    assert via_module.stdout.strip() == expected
    script = shutil.which("attnjit", path=os.path.dirname(sys.executable))
    assert script, "the attnjit console script is not next to this Python"
    via_script = subprocess.run([script, "--version"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert via_script.stdout.strip() == expected
    # An error exit status is the CLI's own.
    bad = subprocess.run([script, "no-such-command"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode != 0
