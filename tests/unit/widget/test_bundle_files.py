"""The frontend bundle as the package ships it: minified, dagre in it once, its source map beside it (to js/src)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import hookwidgets

STATIC = Path(hookwidgets.__file__).resolve().parent / "static"
ROOT = Path(__file__).resolve().parents[3]


def test_the_bundle_is_minified_carries_dagre_once_and_names_its_map() -> None:
    js = (STATIC / "widget.js").read_text(encoding="utf-8")
    assert len(js) / js.count("\n") > 1000, "minified: a few long lines"
    assert "ensureWorker" not in js, "minified: local names shortened"
    assert js.count("network-simplex") == 1, "dagre (its ranker's name) once: in the layout engine only"
    assert js.rstrip().endswith("//# sourceMappingURL=widget.js.map")


def test_the_source_map_beside_the_bundle_maps_it_to_js_src_with_the_sources() -> None:
    source_map = json.loads((STATIC / "widget.js.map").read_text(encoding="utf-8"))
    sources = source_map["sources"]
    assert "../../js/src/graph/layout_client.js" in sources
    assert all(source.startswith("../../js/src/") for source in sources), sources
    assert len(source_map["sourcesContent"]) == len(sources), "the wheel has no js/src: the map carries it"
    assert source_map["mappings"]


def test_a_package_build_fails_without_the_source_map() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # tomllib is 3.11+: the floor is 3.10
    ensured = re.search(r"^ensured-targets = \[(.*)\]$", pyproject, re.MULTILINE)
    assert ensured and '"hookwidgets/static/widget.js.map"' in ensured.group(1)
    assert 'artifacts = ["hookwidgets/static/*"]' in pyproject  # shipped beside widget.js
