"""One module per subcommand; each exposes a click ``command`` and a typed ``run``."""
