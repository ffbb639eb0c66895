"""Every dialect registers its ops on import; import this package before parsing."""

from . import aten, fx  # noqa: F401
