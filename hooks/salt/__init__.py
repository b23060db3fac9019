"""The ``salt`` hook: the config as a state file, applied by ``salt-call --local``."""
