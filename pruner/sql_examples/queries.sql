-- pruner's example queries. Each block: `-- name:`, `-- dialect:` (duckdb | spark |
-- datafusion), `-- why:` and one statement ending in `;`. The tables are written by
-- pruner.demo.write_example_tables: events (Lance), events_pq (Parquet), users (Parquet).
-- expected.json holds each query's per-scan selection on the test dataset (40,000 events,
-- 1,024-row zones); tests/test_sql_examples.py checks it and that pruning never changes
-- an answer. Regenerate it with PRUNER_UPDATE_GOLDEN=1 after a deliberate change.

-- name: point_lookup
-- dialect: duckdb
-- why: the basic case, an equality on an indexed high-cardinality column
SELECT * FROM events WHERE user_id = 4724;

-- name: point_lookup_reversed
-- dialect: duckdb
-- why: literal on the left
SELECT event_id FROM events WHERE 4724 = user_id;

-- name: point_lookup_qualified_alias
-- dialect: duckdb
-- why: qualified column through an alias
SELECT e.event_id FROM events AS e WHERE e.user_id = 3125;

-- name: uuid_lookup
-- dialect: duckdb
-- why: a string key
SELECT * FROM events WHERE trace_id = '5065e499-8f2b-4b1c-8a6b-fbf685ab09d6';

-- name: uuid_absent
-- dialect: duckdb
-- why: a key that is nowhere: almost every zone is pruned
SELECT count(*) FROM events WHERE trace_id = '00000000-0000-4000-8000-000000000000';

-- name: in_list
-- dialect: duckdb
-- why: IN probes every value in one batch
SELECT * FROM events WHERE user_id IN (4724, 3125, 3420);

-- name: in_list_hundreds
-- dialect: duckdb
-- why: hundreds of values
SELECT count(*) FROM events WHERE event_id IN (0, 101, 202, 303, 404, 505, 606, 707, 808, 909, 1010, 1111, 1212, 1313, 1414, 1515, 1616, 1717, 1818, 1919, 2020, 2121, 2222, 2323, 2424, 2525, 2626, 2727, 2828, 2929, 3030, 3131, 3232, 3333, 3434, 3535, 3636, 3737, 3838, 3939, 4040, 4141, 4242, 4343, 4444, 4545, 4646, 4747, 4848, 4949, 5050, 5151, 5252, 5353, 5454, 5555, 5656, 5757, 5858, 5959, 6060, 6161, 6262, 6363, 6464, 6565, 6666, 6767, 6868, 6969, 7070, 7171, 7272, 7373, 7474, 7575, 7676, 7777, 7878, 7979, 8080, 8181, 8282, 8383, 8484, 8585, 8686, 8787, 8888, 8989, 9090, 9191, 9292, 9393, 9494, 9595, 9696, 9797, 9898, 9999, 10100, 10201, 10302, 10403, 10504, 10605, 10706, 10807, 10908, 11009, 11110, 11211, 11312, 11413, 11514, 11615, 11716, 11817, 11918, 12019, 12120, 12221, 12322, 12423, 12524, 12625, 12726, 12827, 12928, 13029, 13130, 13231, 13332, 13433, 13534, 13635, 13736, 13837, 13938, 14039, 14140, 14241, 14342, 14443, 14544, 14645, 14746, 14847, 14948, 15049, 15150, 15251, 15352, 15453, 15554, 15655, 15756, 15857, 15958, 16059, 16160, 16261, 16362, 16463, 16564, 16665, 16766, 16867, 16968, 17069, 17170, 17271, 17372, 17473, 17574, 17675, 17776, 17877, 17978, 18079, 18180, 18281, 18382, 18483, 18584, 18685, 18786, 18887, 18988, 19089, 19190, 19291, 19392, 19493, 19594, 19695, 19796, 19897, 19998);

-- name: is_null
-- dialect: duckdb
-- why: IS NULL reads the zones' has-null flags
SELECT count(*) FROM events WHERE country IS NULL;

-- name: is_not_null
-- dialect: duckdb
-- why: IS NOT NULL cannot prune
SELECT count(*) FROM events WHERE country IS NOT NULL;

-- name: not_equals
-- dialect: duckdb
-- why: != cannot prune
SELECT count(*) FROM events WHERE user_id != 4724;

-- name: not_in
-- dialect: duckdb
-- why: NOT IN cannot prune
SELECT count(*) FROM events WHERE user_id NOT IN (4724, 3125);

-- name: not_pushed_down
-- dialect: duckdb
-- why: NOT (a OR b) = NOT a AND NOT b: nothing prunes
SELECT count(*) FROM events WHERE NOT (user_id = 4724 OR country IS NULL);

-- name: double_negation
-- dialect: duckdb
-- why: NOT NOT x is x
SELECT count(*) FROM events WHERE NOT (NOT (user_id = 4724));

-- name: not_of_unknown
-- dialect: duckdb
-- why: NOT of something unknown stays unknown (must not prune everything)
SELECT count(*) FROM events WHERE NOT (amount > 10.0);

-- name: and_two_columns
-- dialect: duckdb
-- why: AND intersects
SELECT * FROM events WHERE user_id = 4724 AND country = 'IN';

-- name: or_two_indexed
-- dialect: duckdb
-- why: OR unites
SELECT * FROM events WHERE user_id = 4724 OR trace_id = '9f9bead3-c632-4236-91a3-0f40c17d897d';

-- name: or_with_unindexed
-- dialect: duckdb
-- why: OR with a column that has no index selects everything (the amount is event 1's, of user 3125: each side matches rows the other does not)
SELECT * FROM events WHERE user_id = 4724 OR amount = 4.305584862415478;

-- name: and_with_unindexed
-- dialect: duckdb
-- why: AND with an unindexed term still prunes by the indexed one
SELECT * FROM events WHERE user_id = 4724 AND amount > 5.0;

-- name: nested_parentheses
-- dialect: duckdb
-- why: AND / OR at depth
SELECT count(*) FROM events WHERE ((user_id = 4724 AND (country = 'IN' OR country IS NULL)) OR (user_id = 3125 AND NOT (amount < 0)));

-- name: range_only
-- dialect: duckdb
-- why: ranges cannot use a bloom filter
SELECT count(*) FROM events WHERE event_id BETWEEN 100 AND 200;

-- name: like_only
-- dialect: duckdb
-- why: patterns cannot use a bloom filter
SELECT count(*) FROM events WHERE trace_id LIKE '5065%';

-- name: function_of_column
-- dialect: duckdb
-- why: a function of the column is not the column
SELECT count(*) FROM events WHERE lower(country) = 'in';

-- name: null_safe_equals
-- dialect: duckdb
-- why: IS NOT DISTINCT FROM a value is an equality
SELECT count(*) FROM events WHERE user_id IS NOT DISTINCT FROM 4724;

-- name: null_safe_null
-- dialect: duckdb
-- why: IS NOT DISTINCT FROM NULL is IS NULL
SELECT count(*) FROM events WHERE country IS NOT DISTINCT FROM NULL;

-- name: is_distinct_from
-- dialect: duckdb
-- why: IS DISTINCT FROM cannot prune
SELECT count(*) FROM events WHERE country IS DISTINCT FROM 'IN';

-- name: equals_null
-- dialect: duckdb
-- why: = NULL is never true
SELECT count(*) FROM events WHERE country = NULL;

-- name: in_with_null
-- dialect: duckdb
-- why: IN (v, NULL) is true only for v
SELECT count(*) FROM events WHERE user_id IN (4724, NULL);

-- name: lossy_decimal_on_int
-- dialect: duckdb
-- why: 1.5 can never equal an integer
SELECT count(*) FROM events WHERE user_id = 1.5;

-- name: exact_decimal_on_int
-- dialect: duckdb
-- why: 4724.0 is 4724
SELECT count(*) FROM events WHERE user_id = 4724.0;

-- name: string_literal_on_int
-- dialect: duckdb
-- why: '4724' is cast to the column's type
SELECT count(*) FROM events WHERE user_id = '4724';

-- name: rounding_string_on_int
-- dialect: duckdb
-- why: '1.5' would be rounded by the engine: cannot tell
SELECT count(*) FROM events WHERE user_id = '1.5';

-- name: huge_double_on_int
-- dialect: duckdb
-- why: a DOUBLE beyond 2^53 equals several integers
SELECT count(*) FROM events WHERE event_id = 9007199254740993e0;

-- name: cast_literal
-- dialect: duckdb
-- why: CAST of a literal is evaluated
SELECT count(*) FROM events WHERE user_id = CAST('3125' AS BIGINT);

-- name: cast_column_widening
-- dialect: duckdb
-- why: a widening cast of the column keeps its values
SELECT count(*) FROM users WHERE CAST(user_id AS HUGEINT) = 42;

-- name: cast_column_to_text
-- dialect: duckdb
-- why: a cast to text changes the values compared
SELECT count(*) FROM events WHERE CAST(user_id AS VARCHAR) = '4724';

-- name: float_zero
-- dialect: duckdb
-- why: an equality on an unindexed DOUBLE reads everything (no amount is zero here; indexed float zeros, both bit patterns, are tested in tests/analysis/test_literals.py)
SELECT count(*) FROM events WHERE amount = 0.0;

-- name: date_literal
-- dialect: duckdb
-- why: DATE literal on a date column
SELECT * FROM users WHERE signup = DATE '2022-03-01';

-- name: date_string
-- dialect: duckdb
-- why: a string literal is cast to DATE
SELECT * FROM users WHERE signup = '2023-07-14';

-- name: invalid_date_string
-- dialect: duckdb
-- why: not a valid date: cannot tell (the engine errors or casts)
SELECT count(*) FROM users WHERE signup = '2023-02-30' OR user_id = 1;

-- name: timestamp_midnight_on_date
-- dialect: duckdb
-- why: a midnight TIMESTAMP equals that DATE
SELECT * FROM users WHERE signup = TIMESTAMP '2022-03-01 00:00:00';

-- name: parquet_point_lookup
-- dialect: duckdb
-- why: the same lookup on the Parquet copy
SELECT * FROM events_pq WHERE user_id = 4724;

-- name: parquet_or_null
-- dialect: duckdb
-- why: Parquet, OR of an equality and IS NULL
SELECT count(*) FROM events_pq WHERE trace_id = '5065e499-8f2b-4b1c-8a6b-fbf685ab09d6' OR country IS NULL;

-- name: inner_join
-- dialect: duckdb
-- why: WHERE on either side of an inner join prunes that side
SELECT e.event_id, u.name FROM events e JOIN users u ON e.user_id = u.user_id WHERE e.user_id = 4724 AND u.plan = 'pro';

-- name: join_on_condition
-- dialect: duckdb
-- why: inner join ON conditions prune like WHERE
SELECT count(*) FROM events e JOIN users u ON e.user_id = u.user_id AND u.name = 'user-0000042';

-- name: left_join_where_is_null
-- dialect: duckdb
-- why: must not prune b: IS NULL is true on the null-extended rows
SELECT count(*) FROM users u LEFT JOIN events e ON u.user_id = e.user_id WHERE e.trace_id IS NULL;

-- name: left_join_on_right
-- dialect: duckdb
-- why: ON of a LEFT JOIN prunes the right side
SELECT count(*) FROM users u LEFT JOIN events e ON u.user_id = e.user_id AND e.user_id = 4724;

-- name: left_join_on_left
-- dialect: duckdb
-- why: ON of a LEFT JOIN never prunes the kept (left) side
SELECT count(*) FROM users u LEFT JOIN events e ON u.user_id = e.user_id AND u.user_id = 42;

-- name: left_join_where_rejects_nulls
-- dialect: duckdb
-- why: a WHERE equality on the right side rejects null-extended rows, so it may prune
SELECT count(*) FROM users u LEFT JOIN events e ON u.user_id = e.user_id WHERE e.user_id = 4724;

-- name: right_join
-- dialect: duckdb
-- why: ON of a RIGHT JOIN prunes the left side only
SELECT count(*) FROM events e RIGHT JOIN users u ON e.user_id = u.user_id AND e.country = 'JP' AND u.plan = 'team';

-- name: full_join
-- dialect: duckdb
-- why: a FULL JOIN's ON prunes neither side
SELECT count(*) FROM events e FULL JOIN users u ON e.user_id = u.user_id AND e.user_id = 4724;

-- name: self_join
-- dialect: duckdb
-- why: two scans of one table, each with its own predicate
SELECT count(*) FROM events a JOIN events b ON a.user_id = b.user_id WHERE a.event_id = 10 AND b.country = 'DE';

-- name: cte
-- dialect: duckdb
-- why: the CTE's own WHERE prunes its scan
WITH mine AS (SELECT * FROM events WHERE user_id = 4724) SELECT count(*) FROM mine;

-- name: cte_pushdown
-- dialect: duckdb
-- why: the outer WHERE reaches the scan through a projection CTE
WITH recent AS (SELECT event_id, user_id AS uid, country FROM events) SELECT * FROM recent WHERE uid = 3125;

-- name: cte_limit_blocks_pushdown
-- dialect: duckdb
-- why: a filter may not pass a LIMIT (ordered, so the first 100 rows are the same in every engine)
WITH first AS (SELECT * FROM events ORDER BY event_id LIMIT 100) SELECT * FROM first WHERE user_id = 3125;

-- name: derived_table
-- dialect: duckdb
-- why: a subquery in FROM
SELECT * FROM (SELECT * FROM events) s WHERE s.trace_id = '9f9bead3-c632-4236-91a3-0f40c17d897d';

-- name: group_by_key_pushdown
-- dialect: duckdb
-- why: a filter on a GROUP BY key commutes with the aggregation
SELECT * FROM (SELECT user_id, count(*) AS n FROM events GROUP BY user_id) g WHERE g.user_id = 3420;

-- name: aggregate_filter_not_pushed
-- dialect: duckdb
-- why: a filter on an aggregate cannot prune
SELECT * FROM (SELECT user_id, count(*) AS n FROM events GROUP BY user_id) g WHERE g.n = 3;

-- name: window_blocks_pushdown
-- dialect: duckdb
-- why: a window function sees every row, so the filter may not pass it
SELECT * FROM (SELECT user_id, row_number() OVER (ORDER BY event_id) AS rn FROM events) w WHERE w.user_id = 3420;

-- name: in_subquery
-- dialect: duckdb
-- why: IN (SELECT ...) is unknown for the outer scan; the inner scan prunes on its own
SELECT count(*) FROM events WHERE user_id IN (SELECT user_id FROM users WHERE name = 'user-0000042');

-- name: exists_correlated
-- dialect: duckdb
-- why: the correlated subquery's own condition prunes its scan (user 3125 has FR events: the answer is not empty)
SELECT count(*) FROM users u WHERE EXISTS (SELECT 1 FROM events e WHERE e.user_id = u.user_id AND e.country = 'FR' AND e.user_id = 3125);

-- name: union_all_branches
-- dialect: duckdb
-- why: each branch of a UNION ALL prunes its own scan
SELECT event_id FROM events WHERE user_id = 4724 UNION ALL SELECT event_id FROM events_pq WHERE user_id = 3125;

-- name: union_pushdown
-- dialect: duckdb
-- why: the outer WHERE reaches both branches
SELECT * FROM (SELECT user_id, event_id FROM events UNION SELECT user_id, event_id FROM events_pq) u WHERE u.user_id = 3420;

-- name: positional_parameter
-- dialect: duckdb
-- why: a prepared statement's parameter
-- parameters: [4724]
SELECT * FROM events WHERE user_id = ?;

-- name: unqualified_ambiguous
-- dialect: duckdb
-- why: user_id exists on both sides: unqualified, it cannot be attributed
SELECT count(*) FROM events e, users u WHERE e.user_id = u.user_id AND u.name = 'user-0000042';

-- name: spark_null_safe
-- dialect: spark
-- why: Spark's <=> with a value
SELECT count(*) FROM events WHERE user_id <=> 4724;

-- name: spark_backticks
-- dialect: spark
-- why: backquoted identifiers
SELECT `event_id` FROM events WHERE `trace_id` = '5065e499-8f2b-4b1c-8a6b-fbf685ab09d6';

-- name: spark_left_semi
-- dialect: spark
-- why: LEFT SEMI JOIN prunes both sides by ON
SELECT * FROM users u LEFT SEMI JOIN events e ON u.user_id = e.user_id AND e.user_id = 4724;

-- name: spark_left_anti
-- dialect: spark
-- why: LEFT ANTI JOIN prunes only the right side
SELECT count(*) FROM users u LEFT ANTI JOIN events e ON u.user_id = e.user_id AND e.country = 'FR';

-- name: spark_in_and_or
-- dialect: spark
-- why: OR of IN lists (Spark never pushes OR filters; pruner does)
SELECT count(*) FROM events WHERE user_id IN (4724, 3125) OR trace_id IN ('f40ae392-8277-4659-b737-2b1a3a37fd4d');

-- name: spark_cte
-- dialect: spark
-- why: CTE pushdown in Spark SQL
WITH x AS (SELECT user_id, country FROM events_pq) SELECT * FROM x WHERE user_id = 3420 AND country IS NULL;

-- name: spark_date
-- dialect: spark
-- why: DATE literal in Spark
SELECT name FROM users WHERE signup = DATE'2022-03-01';

-- name: spark_not_in
-- dialect: spark
-- why: NOT IN cannot prune
SELECT count(*) FROM events WHERE NOT user_id IN (1, 2, 3);

-- name: datafusion_point_lookup
-- dialect: datafusion
-- why: DataFusion's SQL
SELECT "event_id" FROM events WHERE "user_id" = 4724;

-- name: datafusion_double_literal
-- dialect: datafusion
-- why: DataFusion reads 4724.0 as a DOUBLE; still exact below 2^53
SELECT count(*) FROM events WHERE user_id = 4724.0;

-- name: datafusion_cast_syntax
-- dialect: datafusion
-- why: :: casts of literals
SELECT count(*) FROM events WHERE user_id = '3125'::BIGINT;

-- name: datafusion_join
-- dialect: datafusion
-- why: inner join in DataFusion
SELECT e.event_id, u.name FROM events e INNER JOIN users u ON e.user_id = u.user_id WHERE u.name = 'user-0000042';

-- name: datafusion_dollar_parameter
-- dialect: datafusion
-- why: $1 parameters
-- parameters: [4724]
SELECT count(*) FROM events WHERE user_id = $1;

-- name: datafusion_is_null_or
-- dialect: datafusion
-- why: IS NULL OR equality
SELECT count(*) FROM users WHERE plan IS NULL OR name = 'user-0000042';

-- name: datafusion_not_of_and
-- dialect: datafusion
-- why: NOT of an AND cannot prune
SELECT count(*) FROM events WHERE NOT (user_id = 4724 AND country = 'IN');

-- name: review_is_distinct_from_on_outer_side
-- dialect: duckdb
-- why: IS DISTINCT FROM is TRUE on null-extended rows: must not prune e
SELECT count(*) FROM users u LEFT JOIN events e ON u.user_id = e.user_id WHERE e.country IS DISTINCT FROM 'zz' AND e.event_id IS NULL;

-- name: review_null_safe_parameter_null
-- dialect: duckdb
-- why: <=> bound to NULL is IS NULL
-- parameters: [null]
SELECT count(*) FROM events WHERE country IS NOT DISTINCT FROM ?;

-- name: review_cte_column_list
-- dialect: duckdb
-- why: a CTE column list renames by position
WITH t(event_id, user_id) AS (SELECT user_id, event_id FROM events) SELECT count(*) FROM t WHERE user_id = 4724;

-- name: review_table_alias_column_list
-- dialect: duckdb
-- why: a table alias column list renames by position
SELECT count(*) FROM events AS t(user_id, event_id) WHERE user_id = 4724;

-- name: review_union_by_name
-- dialect: duckdb
-- why: UNION BY NAME matches columns by name, not position
SELECT count(*) FROM (SELECT user_id, event_id FROM events_pq UNION ALL BY NAME SELECT event_id, user_id FROM events) WHERE user_id = 4724;

-- name: review_star_replace
-- dialect: duckdb
-- why: * REPLACE changes what a column name means
SELECT count(*) FROM (SELECT * REPLACE (event_id AS user_id) FROM events) WHERE user_id = 4724;

-- name: review_duplicate_output_names
-- dialect: duckdb
-- why: an outer reference to a repeated name is ambiguous
SELECT count(*) FROM (SELECT user_id AS x, event_id AS x FROM events) WHERE x = 4724;

-- name: review_decimal_cast_rounds
-- dialect: duckdb
-- why: CAST to DECIMAL rounds to its scale
SELECT count(*) FROM events WHERE user_id = CAST(3125.4 AS DECIMAL(10,0));

-- name: review_long_decimal_is_double
-- dialect: duckdb
-- why: beyond 38 digits a number is a DOUBLE
SELECT count(*) FROM events WHERE user_id = 3124.9999999999999999999999999999999999999999;

-- name: review_unpivot
-- dialect: duckdb
-- why: UNPIVOT reshapes the table's columns
SELECT count(*) FROM (SELECT * FROM users UNPIVOT (name FOR k IN (name, plan))) WHERE name = 'pro';

-- name: review_cte_read_in_parentheses
-- dialect: duckdb
-- why: a CTE read as (t) is not a plain FROM item
WITH t AS (SELECT * FROM events) SELECT (SELECT count(*) FROM t WHERE user_id = 3125), (SELECT count(*) FROM (t));

-- name: review_schema_qualified
-- dialect: duckdb
-- why: main.events is the same table
SELECT count(*) FROM events WHERE user_id = 3125 UNION ALL SELECT count(*) FROM main.events;

-- name: review_using_sample
-- dialect: duckdb
-- why: USING SAMPLE picks rows before WHERE
SELECT count(*) FROM events WHERE user_id = 3125 USING SAMPLE 50 PERCENT (bernoulli, 42);

-- name: review_union_widening
-- dialect: duckdb
-- why: a union of BIGINT and DOUBLE compares in DOUBLE
SELECT count(*) FROM (SELECT user_id AS v FROM events UNION ALL SELECT amount AS v FROM events_pq) WHERE v = 4724;

-- name: review_tinyint_overflow
-- dialect: duckdb
-- why: a cast that overflows its type errors (DuckDB) or wraps (Spark)
SELECT count(*) FROM events WHERE user_id = TRY_CAST(3125 AS TINYINT);
