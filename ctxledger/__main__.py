"""``python -m ctxledger``: the ``ctxledger`` command, for when the console script is not
on PATH (a checkout run with ``PYTHONPATH``, a virtualenv not activated)."""

from ctxledger.cli.main import main

if __name__ == "__main__":  # importing this module (a tool walking the package) runs nothing
    main()
