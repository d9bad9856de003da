"""Reads the demo's binary blob (stored as LFS on the hub) next to this file."""
import hashlib
import os


def checksum() -> str:
    """sha256 of relu_table.bin, to show LFS bytes arrived intact."""
    path = os.path.join(os.path.dirname(__file__), "relu_table.bin")
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
