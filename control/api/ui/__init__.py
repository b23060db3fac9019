"""The web view at ``/ui/``: a login that keeps a session cookie, page shells, and the JSON and events they read.

It reads through the same services as the REST API (``control.services``), for the session's
project only; a member's or an admin's session may also converge or cancel a stack
(``actions.py``), a reader's changes nothing (docs/ui.md).
"""
