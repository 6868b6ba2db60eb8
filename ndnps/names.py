"""Every name of the training protocol, built and parsed here and nowhere else.

The forwarder reads only the three marker components; the apps build and parse the rest.
"""
from __future__ import annotations

# Marker components (generic NameComponents). The NDN URI form percent-encodes '*'.
INSERT = b"*insert*"
DISTRIBUTE = b"*distribute*"
REMOVE = b"*remove*"
