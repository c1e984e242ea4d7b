"""Adapters that talk to Google Cloud; Google's client libraries are imported only in here."""
