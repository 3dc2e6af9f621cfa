"""The package imports without torch and without a GPU, and its stubs describe the extension."""

import ast

import pytest
from pathlib import Path

import flashjit
from flashjit import _core

from conftest import run_json


def test_imports_without_torch_and_attention_says_why():
    # torch made unimportable in a fresh interpreter: the core works, attention names torch.
    out = run_json(
        "import sys, json\n"
        "sys.modules['torch'] = None\n"
        "import flashjit\n"
        "try:\n"
        "    flashjit.attention(None, None, None)\n"
        "    err = None\n"
        "except ImportError as e:\n"
        "    err = str(e)\n"
        "c = flashjit.Config({'arch': 'sm_80'}).resolve()\n"
        "print(json.dumps({'torch': flashjit.torch_available, 'err': err, 'family': c.to_dict()['tuning']['family'],"
        " 'torch_loaded': 'flashjit._torch' in sys.modules}))"
    )
    assert out["torch"] is False
    assert out["torch_loaded"] is False
    assert out["err"] is not None and "torch" in out["err"]
    assert out["family"] == "sm80"


def test_imports_without_a_gpu_driver():
    # No driver visible: everything but launches still works, and the reason is reported.
    out = run_json(
        "import json, flashjit\n"
        "print(json.dumps({'gpu': flashjit.gpu_available(), 'reason': flashjit._core.gpu_unavailable_reason(),"
        " 'name': flashjit.build({'arch': 'sm_80', 'head_dim': {'qk': 64, 'v': 64}}).name}))",
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    assert out["gpu"] is False
    assert out["reason"]
    assert out["name"].startswith("fwd_sm80_bf16_d64")


def test_version_is_the_projects():
    cmake = (Path(__file__).resolve().parents[2] / "CMakeLists.txt").read_text()
    assert f"VERSION {flashjit.__version__} " in cmake


def test_every_extension_name_has_a_stub():
    stub = Path(flashjit.__file__).with_name("_core.pyi")
    tree = ast.parse(stub.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stubbed |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    stubbed = {name for name in stubbed if not name.startswith("_")}  # the stub's own aliases
    public = {name for name in dir(_core) if not name.startswith("__")}
    assert public - stubbed == set()
    assert stubbed - public == set()
    assert Path(flashjit.__file__).with_name("py.typed").exists()


def test_errors_derive_from_flashjit_error_and_the_expected_builtin():
    assert issubclass(flashjit.ConfigError, flashjit.Error) and issubclass(flashjit.ConfigError, ValueError)
    assert issubclass(flashjit.ArgumentError, ValueError)
    assert issubclass(flashjit.UsageError, ValueError)
    assert issubclass(flashjit.CompileError, RuntimeError)
    assert issubclass(flashjit.DriverError, RuntimeError)
    assert issubclass(flashjit.NoDeviceError, RuntimeError)
    assert issubclass(flashjit.CacheMissError, RuntimeError)
    assert issubclass(flashjit.LockTimeout, TimeoutError)
    assert issubclass(flashjit.PrecompileError, flashjit.Error)


@pytest.mark.parametrize("first", ["numpy", "torch"])
def test_a_cpp_library_imported_first_leaves_builds_and_number_formatting_working(first, tmp_path):
    # numpy or torch loading libstdc++ before flashjit._core made a build crash in std::regex (and
    # torch's schema printing crash) on Ubuntu 24.04 with g++ 13; flashjit now puts libstdc++ in
    # the global scope first. Run as the user would: the other library first.
    pytest.importorskip(first)
    out = run_json(
        f"import json, {first}, flashjit\n"
        "k = flashjit.build({'arch': 'sm_80', 'head_dim': {'qk': 64, 'v': 64}, 'mask': 'causal'})\n"
        "print(json.dumps({'name': k.name, 'registers': k.registers}))",
        env={"FLASHJIT_CACHE_DIR": str(tmp_path)},
    )
    assert out["name"].startswith("fwd_sm80_bf16_d64_causal")
    assert out["registers"] > 0


def test_extension_exports_only_its_module_entry():
    # Every other symbol stays local (python/src/exports.map): libstdc++ and modules loaded later
    # cannot bind to the extension's copies of inline library code.
    import shutil
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("the export list is a Linux linker script")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm to list the extension's dynamic symbols")
    out = subprocess.run([nm, "-D", "--defined-only", _core.__file__], capture_output=True, text=True, check=True)
    names = {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}
    assert names == {"PyInit__core"}
