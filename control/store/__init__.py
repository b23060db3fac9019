"""Persistence: SQLAlchemy tables and the database lifetime.

* ``orm``: the tables; ``crypt``: columns that hold secrets, encrypted with the data key.
* ``db``: engine, sessions, schema creation; ``sqliteconn``: the SQLite connection class.
* ``bulk``: changed rows written in one ``executemany`` per shape.
* ``workrow``, ``work``: the durable work table and its lease protocol.
* ``previous``: a stack's previous definition (what a rollback returns to), copied in SQL.
* ``credentials``: agent credentials cached per process, revocations seen everywhere within a bound.
"""
