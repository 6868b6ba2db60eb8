"""Forwarding tables, as in NFD: FIB, PIT, CS, dead-nonce list, strategy choice, persistent PIT."""
