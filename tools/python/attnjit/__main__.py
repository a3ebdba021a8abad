"""`python -m attnjit ...` and the `attnjit` console script: run the attnjit CLI.

The CLI is a C++ program; an installed wheel carries it at attnjit/bin/attnjit
(beside libattnjit.so). From a source checkout, the build tree's binary is
used. The process is replaced (exec), so exit status, signals and output are
the CLI's own.
"""

import os
import sys


def cli_path():
    """The attnjit executable this package would run, or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "bin", "attnjit"),
                 os.path.normpath(os.path.join(here, "..", "..", "..", "build", "attnjit"))):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def main():
    path = cli_path()
    if path is None:
        sys.stderr.write("attnjit: error: the attnjit CLI is not part of this installation; install the package "
                         "with `pip install .` from the repository, or build it (bash tools/setup/build.sh)\n")
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [path] + sys.argv[1:])
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main())
