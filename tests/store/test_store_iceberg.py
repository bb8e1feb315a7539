"""An Iceberg table on the S3 server: written there by pyiceberg, indexed and read there by
pruner, judged by pyiceberg's own reader (``scan().to_arrow()``, the query run by DuckDB over
its rows)."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import pruner
from pruner import storage
from pruner.errors import InvalidParameterError
from pruner.index import update_index
from tests.support.engine_check import multiset
from tests.support.s3 import S3Server, environment

pytest.importorskip("pyiceberg")

SQL = [
    "SELECT count(*) AS n FROM t",
    "SELECT s FROM t WHERE id = 60",
    "SELECT s FROM t WHERE id IN (10, 60, 199, 250)",
    "SELECT count(*) AS n FROM t WHERE id = 10",
]


def _rows(start: int, count: int) -> pa.Table:
    ids = np.random.default_rng(start).permutation(np.arange(start, start + count))
    return pa.table(
        {"id": ids.astype(np.int64), "s": pa.array([f"s{i}" for i in ids], pa.string())}
    )


def _catalog(s3: S3Server, bucket: str, tmp_path: Any) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(
        "store",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=f"s3://{bucket}/warehouse",
        **{
            "s3.endpoint": s3.endpoint,
            "s3.access-key-id": s3.options["aws_access_key_id"],
            "s3.secret-access-key": s3.options["aws_secret_access_key"],
            "s3.region": s3.options["aws_region"],
        },
    )


def _expected(table: Any, sql: str) -> Any:
    connection = duckdb.connect()
    connection.register("rows", table.scan().to_arrow())
    return multiset(connection.sql(sql.replace("FROM t", "FROM rows")).arrow().read_all())


def test_an_iceberg_table_on_the_store_answers_as_its_own_reader(
    s3: S3Server, tmp_path: Any
) -> None:
    """Given as the pyiceberg Table (reached as its own FileIO reaches the store), as its
    metadata file's URI with storage options, and with the AWS_* variables alone; indexed
    on the store under the table's folder."""
    bucket = s3.new_bucket()
    catalog = _catalog(s3, bucket, tmp_path)
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", schema=_rows(0, 0).schema)
    table.append(_rows(0, 200))
    pruner.build_index(table, "id")
    table.append(_rows(200, 100))
    update_index(table, "id")
    table.overwrite(_rows(50, 150))
    table.append(_rows(0, 40))
    table.delete("id < 20")
    update_index(table, "id")
    uri = table.metadata_location
    assert uri.startswith("s3://")
    sources = {
        "Table": (table, None),
        "URI": (uri, s3.options),
        "s3a URI": (uri.replace("s3://", "s3a://", 1), s3.options),
    }
    for sql in SQL:
        expected = _expected(table, sql)
        for how, (source, options) in sources.items():
            for engine in ("duckdb", "datafusion"):
                for prune in (True, False):
                    got = pruner.query(
                        sql, {"t": source}, engine=engine, prune=prune, storage_options=options
                    )
                    assert multiset(got) == expected, (how, sql, engine, prune)
    with environment(s3.environment()):
        got = pruner.query(SQL[2], {"t": uri})
    assert multiset(got) == _expected(table, SQL[2])
    explained = pruner.explain(SQL[1], {"t": table})
    scan = explained.scans[0]
    assert scan.unindexed_fragments == () and scan.selection.num_rows < scan.rows_total
    assert any(key.startswith("_pruner/iceberg-field-1/") for key in s3.keys(table.location()))


def test_a_folder_on_the_store_without_a_version_hint_is_refused(
    s3: S3Server, tmp_path: Any
) -> None:
    bucket = s3.new_bucket()
    catalog = _catalog(s3, bucket, tmp_path)
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", schema=_rows(0, 0).schema)
    table.append(_rows(0, 10))
    folder = storage.location(table.location(), s3.options)
    with pytest.raises(InvalidParameterError, match=r"version-hint\.text"):
        pruner.query("SELECT count(*) FROM t", {"t": folder})


def test_an_iceberg_tables_credentials_never_show(
    s3: S3Server,
    tmp_path: Any,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pyiceberg Table whose FileIO holds recognisable credentials: pruner reads it with
    them and shows them nowhere (its output, errors, logs, files, objects; the witness of
    tests/store/test_secrets.py)."""
    import logging

    from tests.store.test_secrets import KEY_ID, SECRET, Witness

    caplog.set_level(logging.DEBUG, logger="pruner")
    witness = Witness(capfd, caplog)
    bucket = s3.new_bucket()
    catalog = _catalog(s3, bucket, tmp_path)
    catalog.properties.update({"s3.access-key-id": KEY_ID, "s3.secret-access-key": SECRET})
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", schema=_rows(0, 0).schema)
    table.append(_rows(0, 200))
    table = catalog.load_table("ns.events")
    assert table.io.properties["s3.secret-access-key"] == SECRET
    witness.saw("build_index", pruner.build_index(table, "id"))
    opened = pruner.open_table(table)
    witness.saw("open_table", repr(opened))
    witness.saw("pinned", repr(opened.pinned))
    witness.saw("query", pruner.query(SQL[1], {"t": table}))
    explanation = pruner.explain(SQL[1], {"t": table})
    witness.saw("explain", explanation)
    witness.saw("explain json", explanation.to_json_text())
    witness.saw("index_status", pruner.index_status(table))
    witness.printed("successes")
    witness.error("wrong column", lambda: pruner.query("SELECT idd FROM t", {"t": table}))
    witness.error("append", lambda: pruner.append(table, _rows(300, 5)))
    witness.error("no snapshot", lambda: pruner.open_table(table, version=7))
    leaks = witness.leaks([tmp_path], s3, bucket)
    assert not leaks, "a credential surfaced:\n" + "\n".join(leaks)
