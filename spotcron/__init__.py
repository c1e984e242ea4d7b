"""spotcron: scheduled containers on Google Cloud Spot VMs, for cents a month."""

__version__ = "0.1.0"
