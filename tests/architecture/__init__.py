"""The rules docs/architecture.md states about the code's shape, checked on the source."""
