"""`gputui serve`: the app in a browser through textual-serve, behind a secret, Origin and
Host checks, a readonly session mode and sessions that end with their browser.

`auth` (the token and the request checks), `admission` (connections before their first
request passed the checks), `sessions` (the app processes: limits, ending them), `server`
(the aiohttp application with all of them), `upstream` (what is taken from textual-serve, and
its probe), `logs` (serve's log), `child` (what a session's gputui does about the serve that
started it).  textual-serve is imported only by `upstream`; aiohttp by `server`, `upstream`
and `logs`.
"""
