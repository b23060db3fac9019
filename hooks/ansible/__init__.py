"""The ``ansible`` hook: the config as a playbook, run through ansible-runner."""
