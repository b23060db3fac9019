"""Signals: what an agent reports back, recorded in the store.

* ``scope``: what a signal may do (its credential, its generation, its answer).
* ``result``: a result signal applied to its deployment (status, outputs).
* ``batch``: result signals that arrive together, applied in one transaction.
* ``progress``: an agent's IN_PROGRESS reports of a running deployment.
"""
