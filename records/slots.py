"""Fast construction of frozen slotted dataclasses from values that are already valid.

A frozen dataclass's `__init__` stores each field with `object.__setattr__` after parsing keyword
arguments; storing through the slot's member descriptor costs about a third of that. The decode
path builds one or two objects per entry read, so it uses these setters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SlotSetter = Callable[[Any, Any], None]


def slot_setter(cls: type, name: str) -> SlotSetter:
    """The function that stores attribute `name` of a `cls` instance, bypassing `__setattr__`."""
    descriptor = cls.__dict__[name]
    setter: SlotSetter = descriptor.__set__
    return setter


new_instance: Callable[[type], Any] = object.__new__
"""An uninitialised instance of a class, to be filled with slot setters."""
