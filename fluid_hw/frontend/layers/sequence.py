"""(filled in by the control-flow work: sequence layers)"""

from __future__ import annotations

__all__: list[str] = []
