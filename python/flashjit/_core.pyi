"""Type stubs of flashjit._core, the C++ extension (python/src)."""

from typing import Any, Callable, Mapping, Optional

class Error(Exception):
    """Base class of every flashjit error."""

class ConfigError(Error, ValueError):
    """A config breaks rules; ``issues`` lists each (path, value, rule)."""

    issues: list[ConfigIssue]

class ArgumentError(Error, ValueError):
    """A launch argument (tensor, size, stride, pointer) breaks a rule; the text names it."""

class UsageError(Error, ValueError):
    """A bad manifest, shard or other input; ``lines`` has one line per problem."""

    lines: list[str]

class CompileError(Error, RuntimeError):
    """NVRTC failed; ``log`` is its log, ``source_path`` the dumped source."""

    log: str
    source_path: str

class DriverError(Error, RuntimeError):
    """A CUDA driver call failed; ``code`` is its CUresult."""

    code: int

class NoDeviceError(Error, RuntimeError):
    """No CUDA driver or no GPU; the text says which."""

class CacheMissError(Error, RuntimeError):
    """Offline mode (FLASHJIT_OFFLINE=1) and the kernel is in no cache layer."""

class LockTimeout(Error, TimeoutError):
    """A cache entry's lock was not had in time; the text names the lock file."""

class ConfigIssue:
    """One broken rule of a config: where, what was found, which rule."""

    @property
    def path(self) -> str:
        """Dotted JSON path of the field (empty for a file-level problem)."""
    @property
    def value(self) -> str:
        """The value found, as JSON text."""
    @property
    def rule(self) -> str:
        """The rule it breaks."""
    @property
    def message(self) -> str:
        """``"path = value: rule"``."""

class Config:
    """An attention config (schema flashjit.attention.v1). Immutable; equal configs hash equally."""

    def __init__(self, data: Optional[Mapping[str, Any]] = None) -> None:
        """A config from a dict in the JSON form (docs/config.md); None gives the defaults."""
    @staticmethod
    def from_json(text: str, origin: str = "config") -> Config:
        """Parses JSON text; ``origin`` names the text in error messages."""
    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Config:
        """The config of a dict in the JSON form."""
    def to_json(self, indent: Optional[int] = None) -> str:
        """JSON text; without indent the canonical form (sorted keys, no whitespace)."""
    def to_dict(self) -> dict[str, Any]:
        """The JSON form as a dict."""
    def resolve(self, arch: Optional[str] = None) -> Config:
        """Every tuning field filled in for the target; raises ConfigError listing every broken rule."""
    def check(self, arch: Optional[str] = None) -> list[ConfigIssue]:
        """Every broken rule for the target, without raising (empty: valid)."""
    def with_arch(self, arch: str) -> Config:
        """The same config for another target ("native": this machine's GPU)."""
    @property
    def arch(self) -> str:
        """The target, e.g. "sm_90a" or "native"."""
    def __eq__(self, other: object) -> bool: ...
    def __ne__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class LoadedKernel:
    """A kernel loaded in one device's context (memoised by the runtime)."""

    @property
    def device(self) -> int:
        """The CUDA device ordinal."""
    @property
    def name(self) -> str: ...
    @property
    def tile_counter(self) -> bool:
        """The kernel draws tiles from a zeroed device counter (the dynamic scheduler)."""
    def describe(self) -> str:
        """JSON: name, arch, key, file, status, timings, registers, spills, launch facts, resolved config."""

_Strides = tuple[int, int, int]

class LaunchPlan:
    """One call signature of a loaded kernel: sizes and element strides (batch, row, head)."""

    def __init__(
        self,
        kernel: LoadedKernel,
        q: _Strides,
        k: _Strides,
        v: _Strides,
        o: _Strides,
        q_rope: Optional[_Strides],
        k_rope: Optional[_Strides],
        lse: Optional[tuple[int, int]],
        batch: int,
        seqlen_q: int,
        seqlen_k: int,
        heads_q: int,
        heads_k: int,
        total_q: int = 0,
        total_k: int = 0,
        softmax_scale: float = 0.0,
        window_left: int = -1,
        window_right: int = -1,
        num_pages: int = 0,
        max_pages: int = 0,
        page_table_stride: int = -1,
        num_splits: int = 0,
        q_scale_strides: Optional[tuple[int, int]] = None,
        k_scale_strides: Optional[tuple[int, int]] = None,
        k_scale_row_stride: Optional[int] = None,
        v_scale_strides: Optional[tuple[int, int]] = None,
        v_scale_row_stride: Optional[int] = None,
        k_scale_block_stride: Optional[int] = None,
    ) -> None: ...
    @property
    def kernel(self) -> LoadedKernel: ...
    def launch(
        self,
        stream: int,
        q: int,
        k: int,
        v: int,
        o: int,
        q_rope: int,
        k_rope: int,
        lse: int,
        cu_seqlens_q: int,
        cu_seqlens_k: int,
        tile_counter: int,
        page_table: int = 0,
        seqused_k: int = 0,
        workspace: int = 0,
        workspace_bytes: int = 0,
        q_scale: int = 0,
        k_scale: int = 0,
        v_scale: int = 0,
    ) -> None:
        """Launches on ``stream`` with device pointers as integers (0: none); ArgumentError first."""
    def launch_dense(self, stream: int, q: int, k: int, v: int, o: int, tile_counter: int) -> None:
        """launch() with only q, k, v, o and the tile counter (every other pointer 0)."""
    def workspace_bytes(
        self, q: int, k: int, v: int, o: int, lse: int, cu_seqlens_q: int, page_table: int, seqused_k: int,
        q_scale: int = 0, k_scale: int = 0, v_scale: int = 0, q_rope: int = 0, k_rope: int = 0,
    ) -> int:
        """Bytes of device scratch a launch of this signature needs (split-K decode; 0 otherwise)."""

def load_config_file(path: str) -> Config:
    """The config of a JSON file."""

def generate(config: Config, flat: bool = False, reference: bool = False) -> str:
    """The CUDA source of the config's kernel (flat: self-contained)."""

def build(config: Config, seqlen_k: Optional[int] = None, reference: bool = False) -> str:
    """Compiles or reads the cache without a GPU ("native": this GPU); the kernel's description (JSON)."""

def load_kernel(config: Config, seqlen_k: Optional[int] = None, device: int = -1) -> LoadedKernel:
    """The kernel loaded in ``device``'s primary context (-1: the current context)."""

def gpu_available() -> bool:
    """A CUDA driver is present and sees at least one GPU."""

def gpu_unavailable_reason() -> str:
    """Why gpu_available() is False."""

def arch_for_compute_capability(major: int, minor: int) -> str:
    """The target a GPU of that compute capability is compiled for (9.0 -> "sm_90a")."""

def version() -> str:
    """flashjit's version."""

def nvrtc_identity() -> str:
    """The NVRTC version and library size that key the cache."""

def precompile(
    manifest: str,
    jobs: int,
    archs: list[str],
    shard: str,
    keep_going: bool,
    json_summary: str,
    progress: Optional[Callable[[str], Any]],
) -> tuple[int, str]:
    """Runs ``flashjit precompile``: (exit code, summary text); the JSON summary goes to json_summary."""

def cache_dir() -> str: ...
def cache_layers() -> list[str]: ...
def cache_offline() -> bool: ...
def cache_max_bytes() -> int: ...
def cache_list() -> str:
    """``flashjit cache list --json``."""

def cache_verify(remove: bool = False) -> list[dict[str, Any]]: ...
def cache_prune(max_bytes: int) -> tuple[int, list[str]]: ...
def cache_clear() -> tuple[int, list[str]]: ...
def cache_export(dir: str) -> int: ...
def cache_import(dir: str) -> tuple[int, list[str]]: ...
def parse_byte_size(what: str, text: str) -> int:
    """"512M", "2G", ... as bytes (powers of 1024)."""
