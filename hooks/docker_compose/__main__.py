"""Run the docker-compose hook: ``python -m hooks.docker_compose < deployment.json``."""

from hooks.common import main
from hooks.docker_compose.hook import run

raise SystemExit(main(run, name="docker-compose"))
