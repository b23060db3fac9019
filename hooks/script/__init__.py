"""The ``script`` hook: run the config as a program with the inputs in its environment."""
