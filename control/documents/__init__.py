"""Documents: the store's state as one signed, sealed document per server.

* ``render``: a server's document from its deployment rows (`render_document`).
* ``seal``: which values are secret, and sealing them to the server's key.
* ``hashing``: a derived config's idempotency hash (the agent never computes one).
* ``publish``: the Publisher port and the HTTP publisher (ETag, long-poll).
* ``reconcile``: every process republishes what the database has and it has not.
* ``heat``: the metadata Heat's own agent chain polls.
"""
