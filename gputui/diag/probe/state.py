"""The probe's state: what the checks learn, for the checks after them."""

from __future__ import annotations

import os

from .nvml import Nvml
from .protocol import read_text, safe


class Probe:
    """What the checks learn, for the checks after them."""

    def __init__(self, options):
        self.options = options
        self.nvml = Nvml()
        self.nvml_devices = []
        self.driver_cuda = None
        self.in_container = False
        self.container_evidence = []
        self.expected_visible = None  # GPUs CUDA should see, from NVML and the variables
        self.visible_nvml = None
        """NVML indices of the GPUs CUDA will show here (None: unknown)."""
        self.torch = None
        self.torch_cuda = None
        self.cuda_api = None
        self.available = False
        self.device_count = 0
        self.link_under_load = {}
        self.workers = []
        self.worker_started = None
        self.nccl_short = []
        """The GPUs with too little free memory for an all-reduce rank (who holds it): the
        NCCL check is then not run, and says so."""
        self.kernel_evidence = {}
        self.ld_library_path_libs = {}
        self.cuinit = None
        self.start_errors = {}
        """Starters that failed: name -> error (the check that waits on one reports it)."""

    def container(self):
        why = []
        if os.path.exists("/.dockerenv"):
            why.append("/.dockerenv")
        if os.path.exists("/run/.containerenv"):
            why.append("/run/.containerenv (podman)")
        cgroup = read_text("/proc/1/cgroup") or ""
        for word in ("docker", "kubepods", "containerd", "libpod", "lxc"):
            if word in cgroup:
                why.append(f"/proc/1/cgroup mentions {word}")
                break
        if os.environ.get("container"):
            why.append("container={}".format(os.environ["container"]))
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            why.append("KUBERNETES_SERVICE_HOST is set")
        self.in_container = bool(why)
        self.container_evidence = why

    def nvml_index(self, torch_index):
        """NVML's index of torch's device (by UUID or PCI bus id)."""
        torch = self.torch
        try:
            props = torch.cuda.get_device_properties(torch_index)
            uuid = str(getattr(props, "uuid", "") or "")
        except Exception:
            return None
        for d in self.nvml_devices:
            if uuid and d.get("uuid") and d["uuid"].replace("GPU-", "") == uuid.replace("GPU-", ""):
                return d["index"]
        bus = safe(lambda: torch.cuda.get_device_properties(torch_index).pci_bus_id)
        for d in self.nvml_devices:
            if bus is not None and d.get("bus_id") and int(d["bus_id"].split(":")[1], 16) == bus:
                return d["index"]
        return torch_index if len(self.nvml_devices) == self.device_count else None

    def stop_workers(self):
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except Exception:
                pass

    # ---- after the work: what got loaded, and NVML health ----------------------------
