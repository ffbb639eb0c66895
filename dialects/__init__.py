"""The dialects, one module each. Each registers its ops when imported, and the core imports a
dialect's module the first time one of its ops is looked up: reading loops, scheduled or triton
IR never loads torch (only fx and aten, which wrap torch's own graphs, do)."""

from mind.ir.registry import dialect_module

for _name in ("fx", "aten", "loops", "scheduled", "triton"):
    dialect_module(_name, f"{__name__}.{_name}")
