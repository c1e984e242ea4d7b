"""The `h` and `running` fixtures are in tests/conftest.py."""
