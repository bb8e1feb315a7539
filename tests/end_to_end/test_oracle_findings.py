"""Wrong answers the differential oracle found, kept as regression tests.

Found by ``PRUNER_FUZZ_CASES=1000`` with the oracle (the engine alone over the raw files):
a RIGHT JOIN of a one-row Lance table ``b`` (x) and a Parquet table ``a`` (y), WHERE a
condition the null-extended rows satisfy (``x.k IS NULL``). DataFusion alone (Parquet by
``register_parquet``, Lance as record batches) keeps the 24 unmatched rows of ``a``;
``pruner.query(..., engine="datafusion")`` answered no row, pruned *and* unpruned: pruner's
Lance source has no row-count statistics, so DataFusion swapped the join's inputs and hit its
own outer-join swap bug (``tests/adapters/test_datafusion_bugs.py``). Fixed by the settings
pruner's DataFusion contexts use (``pruner.adapters.datafusion.SAFE_SETTINGS``).
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
