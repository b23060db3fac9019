"""The HTTP boundary: requests become service calls, their results and errors become JSON.

app         the application factory and the resources it owns (database, engine, transports)
app_keys    the typed AppKeys the routes read those resources by
routes      ROUTES: every route, one table per audience
middleware  default-deny authentication, domain errors as JSON, request helpers
body        request bodies: caps before reading, a deadline, the unauthenticated gate, JSON checked whole
diskfull    a full disk told apart from a busy database (503 disk_full, naming where)
operator    the operator's routes: stacks, deployments, servers, keys, imports from media
agent       what agents call: enrolment, documents, heartbeats, signals
heat        what Heat's own agent chain polls: a server's metadata
ui/         the web view at /ui/: login and session cookie, pages, their JSON and event stream
openapi     the OpenAPI description served at /openapi.json (its parts in openapi_schemas)
"""
