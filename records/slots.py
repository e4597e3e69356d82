"""Fast construction of frozen slotted dataclasses from values that are already valid.

A frozen dataclass's `__init__` stores each field with `object.__setattr__` after parsing keyword
arguments; storing through the slot's member descriptor costs about a third of that. The decode
path builds one or two objects per entry read, so it uses these setters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

SlotSetter = Callable[[Any, Any], None]


def slot_setter(cls: type, name: str) -> SlotSetter:
    """The function that stores attribute `name` of a `cls` instance, bypassing `__setattr__`."""
    descriptor = cls.__dict__[name]
    setter: SlotSetter = descriptor.__set__
    return setter


new_instance: Callable[[type], Any] = object.__new__
"""An uninitialised instance of a class, to be filled with slot setters."""


def preset_constructor(cls: type, names: Sequence[str]) -> Callable[..., Any]:
    """A constructor of `cls` taking `names` positionally, every other field at its default.

    For values already valid (a controller building records it has checked): it skips the
    dataclass's keyword parsing and frozen `__setattr__`, storing through the slots, about a
    fifth of the cost. ValueError if a field left out has no plain default.
    """
    fields = dataclasses.fields(cls)
    unknown = set(names) - {f.name for f in fields}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {sorted(unknown)}")
    namespace: dict[str, Any] = {"_new": new_instance, "_cls": cls}
    lines = [f"def make({', '.join(names)}):", "    obj = _new(_cls)"]
    for i, f in enumerate(fields):
        namespace[f"_s{i}"] = slot_setter(cls, f.name)
        if f.name in names:
            value = f.name
        elif f.default is not dataclasses.MISSING:
            namespace[f"_d{i}"] = f.default
            value = f"_d{i}"
        else:
            raise ValueError(f"{cls.__name__}.{f.name} has no plain default")
        lines.append(f"    _s{i}(obj, {value})")
    lines.append("    return obj")
    exec(compile("\n".join(lines) + "\n", f"<records.slots {cls.__name__}>", "exec"), namespace)
    make: Callable[..., Any] = namespace["make"]
    return make
