"""Shared fixtures: the Lance-written vectors in ../shared and small Lance datasets."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
VECTORS = SHARED / "vectors" / "lance"

# Lance warns about fork-safety whenever a test process has threads; it is noise here.
warnings.filterwarnings("ignore", message=".*fork.*")


@pytest.fixture(scope="session")
def vectors() -> Path:
    if not VECTORS.is_dir():
        pytest.skip(f"Lance test vectors not found at {VECTORS} (../shared is absent)")
    return VECTORS


@pytest.fixture(scope="session")
def tiny_manifest(vectors: Path) -> dict[str, Any]:
    return json.loads((vectors / "tiny_index_manifest.json").read_text())
