"""Run the chef hook: ``python -m hooks.chef < deployment.json``."""

from hooks.chef.hook import run
from hooks.common import main

raise SystemExit(main(run, name="chef"))
