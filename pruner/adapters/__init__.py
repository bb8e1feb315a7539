"""Engine adapters: run a user's SQL on DuckDB, DataFusion or Spark, reading only what the
selections allow. Each engine module imports its engine; import the one you use."""
