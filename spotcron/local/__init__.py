"""Local stand-ins for the cloud edges, used by tests and by local mode (`spotcron up`).

Among them: `metadata.LocalMetadataServer` answers like the Compute Engine metadata server for
many fake VMs, `signer.LocalSigner` signs their instance identity tokens with a local key, and
`bucket.LocalBucket` runs gcp-storage-emulator in-process. Nothing here is deployed.
"""
