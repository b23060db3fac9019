"""Run the script hook: ``python -m hooks.script < deployment.json``."""

from hooks.common import main
from hooks.script.hook import check, run

raise SystemExit(main(run, name="script", check=check))
