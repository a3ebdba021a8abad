# Lets `pytest tools/python/tests` import the package from this checkout
# without PYTHONPATH or an install.
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
