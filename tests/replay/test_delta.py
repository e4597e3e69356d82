"""The area deltas of `replay.delta` see no other area: `MetadataDelta` routes and fans out.

As in Kafka's `metadata/image`, a record that rests on or changes another area goes through
the router, so each area's delta module imports no other area's delta and no other area's
image (a test of the source, which an import added for a shortcut fails).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from replay.image import MetadataImage
from tests.support.paths import REPO
from tests.support.source_tree import parsed, python_files

AREA_IMAGES = {
    area: image for area, image in get_type_hints(MetadataImage).items() if area != "provenance"
}
"""The image of each area, by its field of `MetadataImage`."""

SHARED = frozenset({"replay.delta.maps"})
"""Modules of `replay.delta` every area may use: helpers, not areas."""


def _area_modules() -> dict[str, Path]:
    """The modules of `replay/delta/` that define an area's delta, by module name."""
    modules: dict[str, Path] = {}
    for path in python_files("replay/delta"):
        classes = [node.name for node in parsed(path).body if isinstance(node, ast.ClassDef)]
        if any(name.endswith("Delta") and name != "MetadataDelta" for name in classes):
            modules[path.stem] = path
    return modules


AREA_MODULES = _area_modules()


def _imports(path: Path) -> list[tuple[str, str]]:
    """Every (module, name) the file imports, at its top or not (TYPE_CHECKING too)."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            found.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names)
    return found


def test_every_area_of_the_image_has_its_delta_module() -> None:
    assert sorted(AREA_MODULES) == sorted(AREA_IMAGES)


@pytest.mark.parametrize("area", sorted(AREA_MODULES))
def test_an_area_delta_imports_no_other_area(area: str) -> None:
    path = AREA_MODULES[area]
    module = importlib.import_module(f"replay.delta.{area}")
    deltas: list[Any] = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and value.__module__ == module.__name__
        and value.__name__.endswith("Delta")
    ]
    applied = [get_type_hints(delta.apply)["return"] for delta in deltas]
    assert applied == [AREA_IMAGES[area]]
    imported = _imports(path)
    other_deltas = [
        f"{name} from {where}"
        for where, name in imported
        if (where.startswith("replay.delta") or name == "delta") and where not in SHARED
    ]
    assert other_deltas == [], f"{path.relative_to(REPO)} imports another area's delta"
    others = {image.__name__ for other, image in AREA_IMAGES.items() if other != area}
    other_images = [name for where, name in imported if where == "replay.image" and name in others]
    assert other_images == [], f"{path.relative_to(REPO)} imports another area's image"
