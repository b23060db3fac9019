"""Where the agent reads its documents and sends its signals: one module per source.

* ``switch``: ``AgentTransport``, the source the newest document names, and the switch between
  sources; ``backoff`` after failures; ``adopt_enrolment``.
* ``http``: the control plane's (or a relay's) long-polled document endpoint.
* ``tempurl``: Swift TempURLs and S3 presigned URLs.
* ``file``: LOCAL media mounted at ``media_dir``.
* ``offline``: offline enrolment and the signed signal files written to media.
"""
