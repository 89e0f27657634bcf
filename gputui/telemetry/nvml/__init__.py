"""NVML: the only room that imports pynvml (`query.Nvml`), the live source (`source.NvmlSource`),
GPM sampling and the NVLink/P2P topology read.  Nothing is imported here: each module is
imported by its own name, so loading one does not load the others."""
