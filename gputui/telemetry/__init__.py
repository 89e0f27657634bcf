"""The data layer: NVML, psutil and recordings.  No Textual import anywhere below here."""
