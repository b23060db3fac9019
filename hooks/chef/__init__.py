"""The ``chef`` hook: ``chef-client -z`` (or ``cinc-client -z``) with a node JSON from the inputs."""
