"""The plotly.js the pages load is the small bundle vendored in static/vendor/plotly/, and it
holds every trace type the portal's figures use: a chart module that starts drawing, say, a
heatmap fails here, not as an empty box in the browser."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import plotly.graph_objects as go
import pytest
from plotly.basedatatypes import BaseTraceType

from tests.pages.conftest import client_for
from tests.pages.test_charts import FIGURES, _pages

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "static" / "vendor" / "plotly" / "plotly-finance.min.js"
APPS = ("accounting", "allocations", "kit", "people", "portal", "projects")
TRACE_CLASSES = [getattr(go, name) for name in go.__all__]  # the module loads them lazily
TRACE_TYPES = frozenset(
    trace().type
    for trace in TRACE_CLASSES
    if isinstance(trace, type) and issubclass(trace, BaseTraceType)
)


def bundle_trace_types() -> set[str]:
    """The trace modules the bundle registers, as its minified source names them."""
    source = BUNDLE.read_text(encoding="utf-8")
    return set(re.findall(r'moduleType:"trace",name:"(\w+)"', source))


def chart_module_trace_types() -> dict[str, set[str]]:
    """Each trace type a ``"type": "..."`` of the project's chart code names, with the files
    that name it (axis types such as "date" or "log" are not trace types and are left out)."""
    found: dict[str, set[str]] = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Dict):
                    continue
                for key, value in zip(node.keys, node.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and key.value == "type"
                        and isinstance(value, ast.Constant)
                        and isinstance(value.value, str)
                        and value.value in TRACE_TYPES
                    ):
                        found.setdefault(value.value, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_bundle_is_plotly_js_with_its_version_and_licence_beside_it():
    head = BUNDLE.read_text(encoding="utf-8")[:200]
    assert "plotly.js (finance - minified) v4.1.0" in head
    assert "MIT License" in (BUNDLE.parent / "LICENSE").read_text(encoding="utf-8")
    assert "4.1.0" in (BUNDLE.parent / "README.md").read_text(encoding="utf-8")
    assert BUNDLE.stat().st_size < 1_500_000  # the full plotly.min.js is 4.8 MB


def test_the_bundle_holds_every_trace_type_the_chart_code_names():
    assert {"scatter", "bar", "heatmap"} <= TRACE_TYPES
    assert "date" not in TRACE_TYPES  # an axis type, not a trace type
    used = chart_module_trace_types()
    assert {"scatter", "bar", "indicator"} <= used.keys()  # the scan finds what is there
    bundle = bundle_trace_types()
    missing = {kind: sorted(files) for kind, files in used.items() if kind not in bundle}
    assert not missing, f"trace types the vendored plotly.js cannot draw: {missing}"


@pytest.mark.django_db
def test_the_chart_pages_load_the_small_bundle_and_draw_only_what_it_holds(site):
    bundle = bundle_trace_types()
    drawn: set[str] = set()
    for role, url in _pages(site):
        content = client_for(site.users[role]).get(url).content.decode()
        assert "/static/vendor/plotly/plotly-finance.min.js" in content, url
        assert "plotly.min.js" not in content, url
        for _key, text in FIGURES.findall(content):
            drawn |= {trace.get("type", "scatter") for trace in json.loads(text)["data"]}
    assert drawn >= {"scatter", "bar", "indicator"}
    assert drawn <= bundle
