"""The S3 server the store tests share, and a fresh bucket per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.s3 import S3Server


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    pytest.importorskip("moto")
    server = S3Server()
    yield server
    server.stop()


@pytest.fixture
def bucket(s3: S3Server) -> str:
    """``s3://<a new bucket>``."""
    return "s3://" + s3.new_bucket()
