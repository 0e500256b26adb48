"""Zip archives built member by member (snapshot uploads the service must refuse)."""

from __future__ import annotations

import io
import zipfile


def zip_with(members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()
