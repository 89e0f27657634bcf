"""NCCL's own view of a job, from its RAS service (NCCL 2.24 and newer): `model` (the frozen
dataclasses and the parsers of its answers, pure), `client` (the bounded socket query),
`findings` (what the answers say is wrong, pure), `watch` (the thread that asks).  See
docs/job-health.md, "NCCL RAS"."""
