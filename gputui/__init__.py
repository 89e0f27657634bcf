"""gputui: a terminal GPU monitor built on NVML, psutil and Textual."""

__version__ = "0.1.0"
