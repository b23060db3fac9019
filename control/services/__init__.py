"""Use cases behind the routes; each runs in one transaction and returns plain data.

- ``stacks``: create, update, delete, cancel, suspend and resume a stack (parse, validate, store).
- ``queries``: what operators read: stacks, resources, deployments, events, outputs, failures.
- ``overview``: what the web view draws: stack counts, the dependency graph, pages of resources.
- ``converge``: `stack check` and `stack converge` from the agents' ledger reports.
- ``agents``: enrolment, credentials, heartbeats, and the entry of every signal.
- ``rebuild``: a server whose agent lost its state: re-run or report, visibly.
- ``signing``: the control plane's signing-key rotation.
"""
