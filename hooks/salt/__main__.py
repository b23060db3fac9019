"""Run the salt hook: ``python -m hooks.salt < deployment.json``."""

from hooks.common import main
from hooks.salt.hook import check, run

raise SystemExit(main(run, name="salt", check=check))
