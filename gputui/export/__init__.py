"""Exporters: gputui's data for other tools (Prometheus)."""
