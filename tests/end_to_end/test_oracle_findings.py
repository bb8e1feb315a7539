"""Wrong answers the differential oracle found, kept as regression tests.

Found by ``PRUNER_FUZZ_CASES=1000`` with the oracle (the engine alone over the raw files):
a RIGHT JOIN of a one-row Lance table ``b`` (x) and a Parquet table ``a`` (y), WHERE a
condition the null-extended rows satisfy (``x.k IS NULL``). DataFusion alone (Parquet by
``register_parquet``, Lance as record batches) keeps the 24 unmatched rows of ``a``;
``pruner.query(..., engine="datafusion")`` answered no row, pruned *and* unpruned: pruner's
Lance source has no row-count statistics, so DataFusion swapped the join's inputs and hit its
own outer-join swap bug (``tests/adapters/test_datafusion_bugs.py``). Fixed by the settings
pruner's DataFusion contexts use (``pruner.adapters.datafusion_settings.SAFE_SETTINGS``).
"""

from __future__ import annotations

import datetime  # noqa: F401 - the reproduction's spelling
import math  # noqa: F401
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.differential import TableSpec, assert_same_answer

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")


def test_datafusion_right_join_with_null_extended_is_null(tmp_path: Path) -> None:
    tables = {
        "a": TableSpec(
            layout="parquet",
            data=pa.table(
                {
                    "k": pa.array(
                        [
                            0,
                            1,
                            2,
                            3,
                            4,
                            5,
                            6,
                            7,
                            8,
                            9,
                            10,
                            11,
                            12,
                            13,
                            14,
                            15,
                            16,
                            17,
                            18,
                            19,
                            20,
                            21,
                            22,
                            23,
                            24,
                        ],
                        pa.int64(),
                    ),
                    "i8": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.int8(),
                    ),
                    "ts": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.timestamp("us"),
                    ),
                }
            ),
            fragments=(1, 24),
            items={"k": 1, "i8": 1},
            row_group_rows=1,
            folders="mixed",
        ),
        "b": TableSpec(
            layout="lance",
            data=pa.table(
                {
                    "k": pa.array([0], pa.int64()),
                    "i8": pa.array([None], pa.int8()),
                    "ts": pa.array([None], pa.timestamp("us")),
                }
            ),
            fragments=(1,),
            items={},
            stable_row_ids=True,
            compact=True,
        ),
    }
    sql = (
        "SELECT x.k AS xk, y.k AS yk, y.k AS yv FROM b AS x RIGHT JOIN a AS y ON x.k = y.k "
        "WHERE (NOT (x.k = NULL) OR ((x.k IS NULL AND x.k IS NULL) OR "
        "(x.k IS NULL AND x.k IN (NULL))))"
    )
    assert_same_answer("datafusion", tables, sql, tmp_path)


def test_duckdb_left_join_on_condition_kept_over_read_ahead_rows(tmp_path: Path) -> None:
    """DuckDB 2.0 over a registered Arrow table turned this LEFT JOIN into an anti join that
    dropped ``y.k IS NULL``: the oracle (DuckDB alone over Lance's rows as Arrow) answered 36
    rows of 37, and pruner's read-ahead rows are Arrow too. Both now register a pyarrow
    dataset (tests/adapters/test_duckdb_bugs.py)."""
    tables = {
        "a": TableSpec(
            layout="parquet",
            data=pa.table(
                {
                    "k": pa.array(
                        [
                            0,
                            1,
                            2,
                            3,
                            4,
                            5,
                            6,
                            7,
                            8,
                            9,
                            10,
                            11,
                            12,
                            13,
                            14,
                            15,
                            16,
                            17,
                            18,
                            19,
                            20,
                            21,
                            22,
                            23,
                            24,
                            25,
                            26,
                            27,
                            28,
                            29,
                            30,
                            31,
                            32,
                            33,
                            34,
                            35,
                            36,
                        ],
                        pa.int64(),
                    ),
                    "i8": pa.array(
                        [
                            None,
                            0,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            -128,
                        ],
                        pa.int8(),
                    ),
                    "i16": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.int16(),
                    ),
                    "i32": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            0,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            0,
                            None,
                            None,
                            None,
                            0,
                            None,
                            -2147483648,
                            3,
                            None,
                            None,
                            0,
                            0,
                            0,
                            0,
                            None,
                            None,
                            None,
                            None,
                            0,
                            3,
                            0,
                            None,
                            None,
                            0,
                            None,
                        ],
                        pa.int32(),
                    ),
                }
            ),
            fragments=(37,),
            items={"i8": 1},
            row_group_rows=1,
        ),
        "b": TableSpec(
            layout="lance",
            data=pa.table(
                {
                    "k": pa.array([0, 1, 2, 3], pa.int64()),
                    "i8": pa.array([0, 0, None, None], pa.int8()),
                    "i16": pa.array([None, None, None, None], pa.int16()),
                    "i32": pa.array([None, None, None, None], pa.int32()),
                }
            ),
            fragments=(4,),
            items={"i16": 1},
            stable_row_ids=True,
            compact=True,
        ),
    }
    sql = (
        "SELECT x.k FROM a AS x LEFT JOIN b AS y ON x.i8 = y.i8 AND y.k IS NULL WHERE y.i8 IS NULL"
    )
    assert_same_answer("duckdb", tables, sql, tmp_path)


def test_datafusion_alone_fails_on_utf8view_pruner_answers(tmp_path: Path) -> None:
    """DataFusion alone (register_parquet: strings as Utf8View) raised on ``x.s IS NOT
    DISTINCT FROM NULL``; pruner reads the files' own types and answers as DataFusion over
    in-memory copies does (a known case of the harness: KNOWN_ALONE_FAILURES)."""
    tables = {
        "a": TableSpec(
            layout="parquet",
            data=pa.table(
                {
                    "k": pa.array([11, 13, 0, 1, 12, 4, 2, 3, 7, 9, 10, 6, 5, 8], pa.int64()),
                    "i8": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.int8(),
                    ),
                    "f64": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.float64(),
                    ),
                    "s": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            "",
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.string(),
                    ),
                }
            ),
            fragments=(5, 9),
            items={"k": 1, "i8": 1, "f64": 1, "s": 1},
            row_group_rows=5,
            late=True,
        ),
        "b": TableSpec(
            layout="lance",
            data=pa.table(
                {
                    "k": pa.array(
                        [0, 12, 2, 5, 3, 10, 13, 1, 4, 6, 16, 11, 8, 9, 14, 7, 15], pa.int64()
                    ),
                    "i8": pa.array(
                        [
                            -128,
                            -3,
                            3,
                            None,
                            -128,
                            2,
                            1,
                            -128,
                            -128,
                            -3,
                            None,
                            None,
                            0,
                            None,
                            -128,
                            None,
                            -128,
                        ],
                        pa.int8(),
                    ),
                    "f64": pa.array(
                        [
                            0.0,
                            0.0,
                            0.0,
                            0.0,
                            0.0,
                            0.0,
                            None,
                            0.0,
                            None,
                            0.0,
                            0.0,
                            0.0,
                            None,
                            None,
                            None,
                            None,
                            0.0,
                        ],
                        pa.float64(),
                    ),
                    "s": pa.array(
                        [
                            "s = 'a' OR s = 'b'",
                            "1, 2",
                            None,
                            None,
                            "1, 2",
                            "",
                            "s = 'a' OR s = 'b'",
                            "",
                            "",
                            None,
                            None,
                            "",
                            "",
                            "",
                            None,
                            None,
                            None,
                        ],
                        pa.string(),
                    ),
                }
            ),
            fragments=(17,),
            items={"s": 1},
            stable_row_ids=True,
            compact=True,
        ),
    }
    sql = (
        "SELECT x.k AS xk, y.k AS yk, y.s AS yv FROM a AS x RIGHT JOIN b AS y ON x.i8 = y"
        ".i8 WHERE ((x.k = NULL AND y.s = 'ü' AND (y.f64 = -0.0 OR y.f64 = CAST(7.0 AS DO"
        "UBLE) OR y.f64 = 0.1 OR y.f64 = 2.0 OR y.f64 = CAST(1.5 AS DOUBLE) OR y.f64 = CA"
        "ST('NaN' AS DOUBLE) OR y.f64 = CAST('NaN' AS DOUBLE) OR y.f64 = 0.0 OR y.f64 = 2"
        ".0 OR y.f64 = 2.0 OR y.f64 = -3.25 OR y.f64 = CAST('-inf' AS DOUBLE) OR y.f64 = "
        "7.0 OR y.f64 = CAST(2.0 AS DOUBLE) OR y.f64 = -3.25 OR y.f64 = CAST('NaN' AS FLO"
        "AT) OR y.f64 = 2.0 OR y.f64 = -3.25 OR y.f64 = -3.25 OR y.f64 = 0.0 OR y.f64 = C"
        "AST(-0.0 AS DOUBLE) OR y.f64 = -0.0 OR y.f64 = -3.25 OR y.f64 = CAST('-inf' AS F"
        "LOAT) OR y.f64 = 0.1 OR y.f64 = -3.25 OR y.f64 = CAST('-inf' AS DOUBLE) OR y.f64"
        " = 0.0 OR y.f64 = CAST('-inf' AS DOUBLE) OR y.f64 = CAST(0.0 AS DOUBLE) OR y.f64"
        " = CAST('NaN' AS DOUBLE) OR y.f64 = CAST('inf' AS FLOAT) OR y.f64 = CAST(1.5 AS "
        "DOUBLE) OR y.f64 = -0.0 OR y.f64 = 7.0 OR y.f64 = 0.1 OR y.f64 = 0.0 OR y.f64 = "
        "CAST(1.5 AS DOUBLE) OR y.f64 = CAST(-0.0 AS DOUBLE) OR y.f64 = CAST(1.5 AS DOUBL"
        "E) OR y.f64 = CAST(0.0 AS DOUBLE) OR x.s IS NOT DISTINCT FROM NULL)) OR NOT ((x."
        "f64 = '1.5' OR y.f64 IS NOT NULL OR x.s > '5')))"
    )
    assert_same_answer("datafusion", tables, sql, tmp_path)


def test_datafusion_two_literal_filters_pushed_into_lance(tmp_path: Path) -> None:
    """make fuzz: a semi join and NULL literals left DataFusion 55 pushing a conjunction of
    literals into pruner's Lance scan past its identity UDF, which it cannot turn into a
    pyarrow expression (bit_wise_and of two BooleanScalars); the oracle answered no row."""
    tables = {
        "a": TableSpec(
            layout="lance",
            data=pa.table(
                {
                    "k": pa.array(
                        [0, 12, 4, 13, 9, 15, 8, 17, 10, 11, 3, 1, 5, 6, 2, 18, 7, 14, 16],
                        pa.int64(),
                    ),
                    "i8": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.int8(),
                    ),
                    "s": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.string(),
                    ),
                }
            ),
            fragments=(1, 3, 15),
            items={"k": 1, "i8": 1, "s": 1},
            late=True,
            deleted=(16,),
            delete_after_index=True,
            stable_row_ids=True,
            compact=True,
        ),
        "b": TableSpec(
            layout="parquet",
            data=pa.table(
                {
                    "k": pa.array([0, 5, 10, 12, 2, 4, 7, 9, 3, 1, 6, 8, 11], pa.int64()),
                    "i8": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.int8(),
                    ),
                    "s": pa.array(
                        [
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        pa.string(),
                    ),
                }
            ),
            fragments=(6, 4, 1, 2),
            items={"i8": 1, "s": 1},
            row_group_rows=6,
        ),
    }
    sql = (
        "SELECT k FROM a WHERE s IN (SELECT s FROM b WHERE (k = $1 AND s IN ($2) OR"
        " i8 = 2147483648)) AND (k = $3 AND s IN ($4) AND (i8 = '-2' AND NOT ((k NOT IN"
        " (10.0, 300) OR k IS NOT DISTINCT FROM 1e0)) AND ((k = NULL OR s = NULL OR s"
        " BETWEEN 'a ' AND NULL) AND (k IS NULL AND i8 % 3 = '2' AND k < i8) AND s = 'A')))"
    )
    assert_same_answer("datafusion", tables, sql, tmp_path, parameters=[35, "a", 31, "5"])
