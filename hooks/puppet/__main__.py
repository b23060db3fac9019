"""Run the puppet hook: ``python -m hooks.puppet < deployment.json``."""

from hooks.common import main
from hooks.puppet.hook import check, run

raise SystemExit(main(run, name="puppet", check=check))
