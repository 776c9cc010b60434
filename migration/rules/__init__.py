"""The rule families, one module per catalog family (ONX0..ONX5), listed in this one place.

Importing a rule module registers its hooks (``@register`` of ``migration/registry.py``);
:data:`RULES` holds the hooks of the :data:`FAMILIES`, in the order the registry's docstring
describes. Export calls go through the families in a fixed order: ONX4 (call-form rewrites
feed the export call), ONX2 (removed options), ONX0 (the route decision), ONX1 (options of the
chosen route).
"""

from __future__ import annotations

from .. import registry
from . import onx0, onx1, onx2, onx3, onx4, onx5

FAMILIES = {"ONX0": onx0, "ONX1": onx1, "ONX2": onx2, "ONX3": onx3, "ONX4": onx4, "ONX5": onx5}
RULES = registry.collect(FAMILIES.values())
