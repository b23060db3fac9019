"""The database's schema revisions (Alembic): ``versions/`` holds one module per change.

How to add one: README.md beside this file. ``python -m control.store.migrations "what changed"``
writes a draft for the difference between the ORM (``control/store/orm.py``) and the newest
revision; ``control/store/schema.py`` runs them.
"""
