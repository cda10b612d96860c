"""Write the plug-in that docs/plugins.md builds: its ``toml`` block as pyproject.toml and its ``python`` blocks, in
order, as icldyn_toy/__init__.py.

    python docs/extract_plugin.py DEST && pip install -e DEST
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PAGE = Path(__file__).with_name("plugins.md")


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, flags=re.S | re.M)


def extract(dest: Path, page: Path = PAGE) -> Path:
    text = page.read_text()
    [pyproject] = blocks(text, "toml")
    (dest / "icldyn_toy").mkdir(parents=True, exist_ok=True)
    (dest / "pyproject.toml").write_text(pyproject)
    (dest / "icldyn_toy" / "__init__.py").write_text("\n\n".join(b.rstrip() + "\n" for b in blocks(text, "python")))
    return dest


if __name__ == "__main__":
    print(extract(Path(sys.argv[1])))
