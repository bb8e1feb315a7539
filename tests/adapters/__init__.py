"""The engine adapters: DuckDB, DataFusion and Spark (its SQL path, data source and distributed
index build)."""
