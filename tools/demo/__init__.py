"""The local fleet of ``tools/run-local``: run as ``python -m tools.demo`` (see __main__)."""
