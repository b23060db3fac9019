"""Run the ansible hook: ``python -m hooks.ansible < deployment.json``."""

from hooks.ansible.hook import check, run
from hooks.common import main

raise SystemExit(main(run, name="ansible", check=check))
