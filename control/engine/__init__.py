"""The convergence engine: durable, leased steps over a stack's resources.

- ``worker``: ``Engine``, the claim and renew loops and a task per leased stack.
- ``step``: one step of a stack (``Step``): expiry, checks, the walk, the cleanup, the finish.
- ``act``: one resource's turn in a walk (create, update or replace through its handler).
- ``idle``: the "only waiting" shortcut that answers a step which would change nothing.
- ``slices``: a big stack's step commits slice by slice, holding light records (``Light``).
- ``rollback``: a failed create or update returns to the previous definition.
- ``lifecycle``: the SUSPEND and RESUME walks.
- ``settle``: where results land (a deployment's on its resource, a step's end on its stack); a leaf.
- ``stackdef``: a stack's parsed definition, cached per process.
"""
