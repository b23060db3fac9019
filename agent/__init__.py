"""The agent: runs on every server, fetches its document, runs the hooks, signals the results.

Beyond the standard library it needs only cryptography (and aiohttp for the relay's server),
never the control plane; a running agent verifies and opens secrets through the system's
libcrypto instead when it has one (``crypto``). ``anneal-agent run`` on http:// URLs does not
load ``ssl`` (``tls``).
The map, stage by stage, in the order a document travels:

=========================  ==================================================================
stage                      modules
=========================  ==================================================================
command line, enrolment    ``cli`` (``anneal-agent``: parses, decides on TLS), ``commands``
                           (what each command does), ``config`` (agent.json), ``keys``
                           (key pairs, ``Unsealer``), ``client`` (HTTP calls, heartbeats),
                           ``httpclient`` (HTTP/1.1 on asyncio streams), ``tls`` (``ssl``
                           only for https URLs), ``addresses`` (the server's addresses, reported)
the loop                   ``loop`` (``Agent``: poll, run, heartbeat, status as tasks)
poll: where from           ``transports/`` (``switch``: the current source; ``http``,
                           ``tempurl``, ``file``, ``offline``)
accept: verify, keep       ``verify`` (the document policy), ``ledger`` (the run-once journal)
run                        ``allowlist`` (the node's own limit), ``attempts`` (retries), ``dispatch`` (which hook,
                           with a deadline), ``inline`` (the built-in ``script`` hook, run by the agent
                           itself), ``component``,
                           ``orders`` (stop orders), ``checks`` (checks on the host, changing
                           nothing), ``output`` (the hook's output on disk),
                           ``progress`` (IN_PROGRESS reports), ``proctree``
signal                     ``outbox`` (results' signals, delivered in order until acknowledged)
after a crash              ``recovery`` (interrupted generations: re-run or report FAILED)
a full state dir           ``diskfull``, ``fsutil`` (atomic private writes)
show                       ``status`` (``anneal-agent status``)
other modes                ``relay`` (store and forward for an isolated network),
                           ``heatcompat`` (in place of Heat's agent)
serving (relay, control)   ``serving`` (an aiohttp server within its descriptor limit),
                           ``loglimit`` (repeated log lines counted, not written)
crypto                     ``crypto`` (verify, open, SHA-256: ``libcrypto`` by ctypes, else
                           cryptography)
errors                     ``errors`` (the ``AgentError`` tree)
=========================  ==================================================================

The protocol the control plane shares, imported by both sides: ``wire`` (documents and
signals, standard library only; its size caps in ``wire_caps``, binary files in
``wire_files``), ``envelope`` (the signed
document) and ``sealed`` (secrets sealed to one server's key); also ``transports.offline``
(enrolment bundles and signed signal files on media).
"""
