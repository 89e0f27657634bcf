"""The host and job side: psutil and /proc (CPU, memory, processes), PID namespaces, start
times, command lines, cgroups and job attribution, launcher trees.  Nothing is imported here:
each module is imported by its own name."""
