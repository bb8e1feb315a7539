"""Helpers the tests share (data writers, engine checks, the differential harness); no tests."""
