"""Heat's Orchestration API v1 (`anneal serve --heat-listen`): the openstack CLI and heatclient unchanged.

Routes at Heat's paths ``/v1/{project_id}/...`` on their own site, translating to the
same services the ``/v1/stacks`` API uses: a stack made through one is seen through
the other. docs/heat-api.md has the route table.

app         the application, and the site it listens on in the main app's lifetime
middleware  the token and the path's project (Scope), Heat's error body, Heat's query parameters
views       Heat's shapes: links, timestamps, stacks, resources, events
translate   Heat's create/update body as Anneal's
versions    the version document at the root, build_info
stacks      stacks: list, create, look up (302), show, update, patch, delete, template, outputs
resources   resources (list, show, metadata, signal, mark unhealthy) and events
actions     suspend, resume, check, cancel_update, cancel_without_rollback
catalogue   validate, resource types, template versions and their functions
software    software configs and software deployments (outside stacks too), metadata/{server}
"""
