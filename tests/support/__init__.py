"""The test harness every tier, `bench/` and `examples/demo.py` share; test modules import it, never each other.

Processes on loopback:
    processes     BIN, ROOT, EXAMPLES, free ports, stopping what a test started
    controlplane  `anneal serve` as a subprocess, and a client for its API and CLI
    agents        real agents the test enrols and runs, and what their state dir holds
    relay         `anneal-agent relay` and its counters
    waiting       wait_until / wait_file / wait_log: the one bounded polling loop

Stores and networks:
    swift         a real Swift all-in-one (tempauth, tempurl, s3api), and `anneal serve`'s arguments for it
    pg            a throw-away PostgreSQL cluster
    courier       the LOCAL transport's media, carried by the test
    proxy         a TCP front that reroutes or blackholes
    faultproxy    an HTTP proxy that duplicates, reorders, delays and replays signals
    netns         network namespaces with one veth and no default route
    disk          a small tmpfs to fill (the full-disk tests)
    faketime      libfaketime clock skew and the R22 control plane and agents

Heat and the hooks:
    heat          a stand-in for heat-engine: serves a Heat document, records signals
    heatchain     Heat's own agent chain (os-collect-config ... heat-config-notify), paths redirected
    hookrun       a built-in hook run as the agent runs it, against a real tool

Data:
    templates     HOT builders: one script on one server, one script on many
    envelopes     signed documents and rotated key chains (unit tests)
    database      a fresh SQLite database with the schema (the `database` fixture)

Fixtures live in conftest.py files: tests/conftest.py (every tier) and tests/integration/conftest.py.
"""
