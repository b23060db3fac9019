"""One module per schema revision, oldest first: ``r<NNNN>_<what changed>.py`` (Alembic skips this file)."""
