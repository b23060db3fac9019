"""The ``puppet`` hook: ``puppet apply`` of the config, inputs as facts (and hiera data)."""
