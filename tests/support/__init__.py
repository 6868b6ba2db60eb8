"""Helpers the tests share: the forwarder-core test kit (fwkit), a raw NDN face on a socket
(rawclient) and an in-process network on the real forwarder core (memnet)."""
