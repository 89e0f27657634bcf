"""Rules gputui and its diagnosis children both apply, written once, one module a subject:
`cuda_devices` (CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as CUDA reads them), `versions`
(version strings), `multicast` (the NVLink-multicast switches every child runs with),
`clocks` (the clock-event reasons that mean "slower than it should be"), `timestamps` (UTC
times), `lifeline` (a child dies with the gputui that started it).

Each module is standard library only, Python 3.8+, with no gputui imports: the children run
in the interpreter being diagnosed and load the files they need by path
(`gputui/diag/probe/__init__.py`); the app imports them as `gputui.rules.NAME`.  This file
imports none of them.
"""
