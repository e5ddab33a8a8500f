"""One cache scheme for finished work: a folder of JSON records, one file per key, written atomically.

A key is either a content hash of everything that determines the record (:func:`content_key`: the table's cells,
the plot's predictions, the simulator seed files) or a readable case key that committed tables carry in their rows
(:func:`theorykit.report.writer.key_of`).  A record is read back only under the same key, so a change of settings is
a new key, never a stale answer.  (The resumable runner, :mod:`theorykit.runner`, appends rows to a CSV as jobs
finish: a log of jobs, not a cache of records.)
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Optional

__all__ = ["content_key", "JsonCache"]


def content_key(obj, length: int = 20) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``obj`` as canonical JSON (sorted keys; values JSON cannot
    hold written with str)."""
    blob = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


class JsonCache:
    """Records under ``folder``, one ``<key>.json`` each (characters other than letters, digits, '.', '_' and '-'
    in the key become '-').  ``get`` returns None for a missing key; ``put`` writes through a temporary file and a
    rename, so an interrupted write leaves no half record."""

    def __init__(self, folder: str):
        self.folder = os.fspath(folder)

    def path(self, key: str) -> str:
        return os.path.join(self.folder, "".join(c if c.isalnum() or c in "._-" else "-" for c in key) + ".json")

    def get(self, key: str) -> Optional[dict]:
        fn = self.path(key)
        if not os.path.exists(fn):
            return None
        with open(fn) as fh:
            return json.load(fh)

    def put(self, key: str, record) -> None:
        os.makedirs(self.folder, exist_ok=True)
        fn = self.path(key)
        with open(fn + ".tmp", "w") as fh:
            json.dump(record, fh, default=float)
        os.replace(fn + ".tmp", fn)
