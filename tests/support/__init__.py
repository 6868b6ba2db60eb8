"""Helpers the tests share: the forwarder-core test kit (fwkit), a raw NDN face on a socket
(rawclient), an in-process network on the real forwarder core (memnet), the processes a
run left (procfs)."""
