#!/usr/bin/env bash
# `pip install .` from the source tree, offline (nanobind and scikit-build-core as installed, no
# index), into a temporary target; then the package's CPU tests run against that installed copy,
# and, with torch and a GPU present, the README's Python example.
# It rebuilds the C++ project (minutes on two cores), so it runs in CI (CI set) or when asked
# (FLASHJIT_TEST_PIP=1), and otherwise exits 77, which ctest reports as skipped.
#   pip_install.sh SOURCE_DIR PYTHON
set -euo pipefail
src="$1" python="$2"
if [[ -z "${FLASHJIT_TEST_PIP:-}" && ( -z "${CI:-}" || "${CI:-}" == false ) ]]; then
  echo "skipped: pip install . rebuilds the C++ project; CI runs this test, FLASHJIT_TEST_PIP=1 runs it here"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
"$python" -m pip install --no-build-isolation --no-deps --no-index -q --disable-pip-version-check \
  --target "$work/site" --config-settings=build-dir="$work/build" "$src"

export PYTHONPATH="$work/site" FLASHJIT_CACHE_DIR="$work/cache"
cd "$work"  # away from the source tree: only the installed copy is importable
"$python" -c "
import pathlib, flashjit
where = pathlib.Path(flashjit.__file__).resolve().parent
assert where == pathlib.Path('$work/site/flashjit').resolve(), where
assert (where / 'py.typed').exists() and (where / '_core.pyi').exists()
print('installed', flashjit.__version__, 'at', where)
"
"$work/site/bin/flashjit" --version >/dev/null
"$python" -m pytest "$src/python/tests/test_import.py" "$src/python/tests/test_config.py" \
  "$src/python/tests/test_generate_build.py" -q -p no:cacheprovider
"$python" "$src/python/tests/readme_example.py" "$src/README.md"
