"""The zone index: SBBF, hashing, builds over Lance and Parquet, damaged and stale indexes,
concurrent builds."""
