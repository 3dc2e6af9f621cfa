"""Runs the README's Python example (the first ```python block of its "## Python" section) where
torch and a GPU are present; elsewhere says why it does not and exits 0."""

import re
import sys
from pathlib import Path


def example(readme: str) -> str:
    section = readme.split("\n## Python", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    if not match:
        raise SystemExit("README.md: no ```python block in the ## Python section")
    return match.group(1)


def main() -> None:
    code = example(Path(sys.argv[1]).read_text())
    try:
        import torch
    except ImportError:
        print("README example not run: torch is not installed")
        return
    if not torch.cuda.is_available():
        print("README example not run: no CUDA GPU")
        return
    exec(compile(code, "README.md (## Python)", "exec"), {})
    print("README example ran")


if __name__ == "__main__":
    main()
