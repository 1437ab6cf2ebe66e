"""Count the imports between the top-level packages, and say which run back up the layers.

    .venv/bin/python scripts/import_directions.py

The layers are those of the import-linter contract "The packages look only down"
(pyproject.toml): an import from a lower package into a higher one "runs back up". `make lint`
already fails on one; this prints the whole picture (docs/architecture.md).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["portal", "allocations", "accounting", "projects", "people", "kit"]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    packages = [name for name in LAYERS if (ROOT / name / "__init__.py").exists()]
    graph = grimp.build_graph(*packages)
    counts: Counter[tuple[str, str]] = Counter()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            source, target = module.split(".")[0], imported.split(".")[0]
            if source != target and target in packages:
                lines = graph.get_import_details(importer=module, imported=imported)
                counts[(source, target)] += max(len(lines), 1)
    back_up = 0
    for (source, target), count in sorted(counts.items()):
        up = LAYERS.index(target) < LAYERS.index(source)
        back_up += count if up else 0
        print(f"{source:12} -> {target:12} {count:4}{'  runs back up' if up else ''}")
    print(f"imports that run back up: {back_up}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
