"""A fresh bucket per test on the run's S3 server (the ``s3`` fixture, tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.support.s3 import S3Server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    """``s3://<a new bucket>``."""
    return "s3://" + s3.new_bucket()
