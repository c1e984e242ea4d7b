import logging

import pytest


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.fields: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict) and fields.get("security"):
            self.fields.append(fields)


@pytest.fixture
def security_log():
    """The structured fields of every security log line the functions write."""
    handler = _Lines()
    logger = logging.getLogger("spotcron.functions")
    logger.addHandler(handler)
    yield handler.fields
    logger.removeHandler(handler)
