"""Headless subcommands: each module has NAME, add_parser(subparsers) and run(args)."""
