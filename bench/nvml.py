"""GPU telemetry for the benchmarks through NVML (libnvidia-ml, loaded with ctypes: no Python
package needed): the SM clock, the power draw, the clock-limit reasons and the energy counter,
so every timed point can say at which clock and power it ran and what energy it took.

    gpu = Telemetry(0)          # None-safe: every reading is None where NVML is missing
    before = gpu.energy_mj()
    ... timed launches ...
    sample = gpu.sample(before)  # {"sm_mhz", "power_w", "limit_reasons", "energy_j"}
"""

import ctypes

# nvmlClocksEventReasons (formerly ClocksThrottleReasons) bits, as nvml.h names them.
_REASONS = [
    (0x1, "gpu idle"),
    (0x2, "applications clocks"),
    (0x4, "SW power cap"),
    (0x8, "HW slowdown"),
    (0x10, "sync boost"),
    (0x20, "SW thermal"),
    (0x40, "HW thermal"),
    (0x80, "HW power brake"),
    (0x100, "display clocks"),
]
_NVML_CLOCK_SM = 1


def reason_names(mask):
    if mask is None:
        return None
    return [name for bit, name in _REASONS if mask & bit]


def nvml_uuid(uuid):
    """NVML's name for a GPU of this UUID (torch's device properties give it without the prefix)."""
    text = str(uuid)
    return text if text.startswith("GPU-") else "GPU-" + text


class Telemetry:
    def __init__(self, index=0, uuid=None):
        """The GPU of this UUID (torch.cuda.get_device_properties(i).uuid), else NVML's index
        `index`. NVML numbers GPUs physically: with CUDA_VISIBLE_DEVICES, CUDA's ordinal i is
        another GPU's NVML index, so callers pass the UUID."""
        self._lib = None
        self._dev = ctypes.c_void_p()
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            found = uuid is not None and lib.nvmlDeviceGetHandleByUUID(
                nvml_uuid(uuid).encode(), ctypes.byref(self._dev)) == 0
            if not found and lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self._dev)) != 0:
                return
            self._lib = lib
        except OSError:
            self._lib = None

    @property
    def available(self):
        return self._lib is not None

    def _uint(self, fn, *args):
        if self._lib is None:
            return None
        out = ctypes.c_uint()
        return out.value if getattr(self._lib, fn)(self._dev, *args, ctypes.byref(out)) == 0 else None

    def _ulonglong(self, fn):
        if self._lib is None:
            return None
        out = ctypes.c_ulonglong()
        return out.value if getattr(self._lib, fn)(self._dev, ctypes.byref(out)) == 0 else None

    def sm_mhz(self):
        return self._uint("nvmlDeviceGetClockInfo", ctypes.c_int(_NVML_CLOCK_SM))

    def power_w(self):
        mw = self._uint("nvmlDeviceGetPowerUsage")
        return None if mw is None else mw / 1000.0

    def energy_mj(self):
        """The board's energy counter since the driver loaded, in mJ (Volta and later)."""
        return self._ulonglong("nvmlDeviceGetTotalEnergyConsumption")

    def limit_reasons(self):
        mask = self._ulonglong("nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = self._ulonglong("nvmlDeviceGetCurrentClocksThrottleReasons")
        return mask

    def sample(self, energy_before_mj=None):
        """Readings at the end of a timed window; energy_j is the energy since energy_before_mj."""
        energy = self.energy_mj()
        mask = self.limit_reasons()
        return {
            "sm_mhz": self.sm_mhz(),
            "power_w": self.power_w(),
            "limit_reasons": reason_names(mask),
            "energy_j": None if energy is None or energy_before_mj is None else (energy - energy_before_mj) / 1000.0,
        }


def energy_per_flop_pj(power_w, median_ms, flops):
    """Energy per FLOP in pJ: board power at the end of the window times the median launch time.
    NVML's energy counter advances in steps of about 0.1 s (on the H200 it read 0 J or about 69 J
    over windows of 3-60 ms), too coarse for a window of 30 launches."""
    return power_w * median_ms * 1e-3 * 1e12 / flops if flops else None
