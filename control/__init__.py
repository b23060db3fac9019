"""The control plane: a HOT template in, one signed document per server out, signals back in.

The folders are the stages data passes through, top to bottom; each imports only the
ones below it (import-linter's layers contract in pyproject.toml, `make lint`):

    cli/         `anneal`: the operator's commands over REST, and `anneal serve`
    api/         the HTTP boundary: routes per audience (operators, agents, Heat), auth, errors
    services/    use cases behind the routes, a transaction each: stacks, queries, agents, converge
    signals/     signal -> store: credentials and generations checked, results applied in batches
    engine/      durable leased steps that walk a stack's resources in dependency order
    resources/   what each resource type does (handlers), derived configs and generations
    transports/  where documents go and signals come from: HTTP, Swift, S3, local media, relay
    documents/   store -> the per-server document: rendered, secrets sealed, signed, published
    store/       the database: ORM rows, sessions, encryption at rest, the work-lease protocol

    hot/         template text -> definition, pure (parameters, functions, types); beside the stack

The shared kernel, used by every stage: errors (the ControlError tree), settings, keys (the
data dir's keys and tokens), runtime (what one process shares), txn (one unit of work) and
provision (the Provisioner port). docs/architecture.md draws the same map with the data flow.
"""
