"""Many hosts: GPUs read from a Prometheus server or scraped from exporters directly.

No Textual here: the sources run on worker threads and hand the UI frozen `ClusterState`s.
"""
