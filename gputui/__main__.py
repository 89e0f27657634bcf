"""`python -m gputui` runs the same entry point as the `gputui` script."""

from gputui.cli import main

raise SystemExit(main())
