"""`gputui serve`: the app in a browser through textual-serve, behind a secret, Origin and Host
checks, a readonly session mode and sessions that end with their browser.

`auth` (the token and the request checks), `sessions` (the app processes: limits, ending
them), `server` (textual-serve's Server with both), `child` (what a session's gputui does
about the serve that started it).  aiohttp and textual-serve are imported only by `server`.
"""
