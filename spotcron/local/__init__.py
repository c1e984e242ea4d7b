"""Local stand-ins for the cloud edges, used by tests and by local mode (`spotcron up`).

Among them: `metadata.LocalMetadataServer` answers like the Compute Engine metadata server for
many fake VMs, `signer.LocalSigner` signs their instance identity tokens with a local key, and
`bucket.LocalBucket` serves buckets from the local storage server (`storage_server`, on disk in
`objects`, resumable uploads in `resumable`), which asks every request for a token from
`grants`: full access for the control plane, an access boundary for each VM. Nothing here is
deployed.
"""
