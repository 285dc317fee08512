"""(filled in by the op work)"""

from __future__ import annotations

__all__: list[str] = []
