"""Alembic migrations of computed's database (a package so ``pip install .`` ships them)."""
