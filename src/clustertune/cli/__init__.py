"""The ``clustertune`` command line: thin wrappers around the library."""
