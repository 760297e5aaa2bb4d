"""One module per subcommand, each with `run(args) -> int`."""
