"""Python stacks of running processes (py-spy), and a job's ranks folded side by side.

No UI here: `dump.dump_many_async` / `dump.dump_in_background` for a UI, `dump.dump_many`
for the command line, `fold.fold` for the frames ranks share, `render` for text and JSON.
"""
