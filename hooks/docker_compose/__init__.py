"""The ``docker-compose`` hook: ``docker compose`` or ``podman-compose`` of the config as a compose file."""
