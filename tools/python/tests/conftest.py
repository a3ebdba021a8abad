# Which attnjit the tests import:
#  * by default the package from this checkout (no PYTHONPATH or install needed);
#  * with ATTNJIT_TEST_INSTALLED=1, the installed one (what `pip install .`
#    put in the environment): the checkout is then kept off sys.path, and
#    test_installed.py checks that the import really came from the install.
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT_PACKAGE_ROOT = os.path.abspath(os.path.join(_HERE, ".."))

if os.environ.get("ATTNJIT_TEST_INSTALLED") != "1":
    sys.path.insert(0, CHECKOUT_PACKAGE_ROOT)
