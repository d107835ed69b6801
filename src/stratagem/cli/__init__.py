"""The ``stratagem`` command line: one module per subcommand."""
