"""FakeCloud (cloud.py) and the fake Google APIs it serves for deploy and destroy."""
