"""Transports: where each server's document goes, and where its signals come back from.

* ``store``: the Store port (`Store`, `StoreError`, `Lifetimes`, signal object names, `Waiting`).
* ``publisher``: `Transports`, the publisher that holds the HTTP publisher and writes to the
  stores, the refresh and signal-collect loops, `assign` and `arrived_via`.
* ``swift``, ``s3``, ``local``, ``relay``: the Store adapters.
* ``offline``: enrolment and signed signal files carried on media (LOCAL).
* ``service``: the wiring into one control-plane process: build, start, import a signal.

docs/transports.md describes each transport.
"""
