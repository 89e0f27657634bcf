"""The job verdicts' rules, each on the evidence the engine (gputui.telemetry.health) gathered
for a tick: `stuck` (ranks that wait and what they wait for, with where their stacks are),
`straggler` (a running job's ranks' waiting shares), `words` (the texts).  Pure: no I/O, no
clock; the engine keeps what must be remembered across ticks."""
