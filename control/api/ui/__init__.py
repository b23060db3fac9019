"""The web view at ``/ui/``: a login that keeps a session cookie, page shells, and the JSON and events they read.

It reads through the same services as the REST API (``control.services``) and changes
nothing: every control is read-only until tokens carry roles (docs/ui.md).
"""
