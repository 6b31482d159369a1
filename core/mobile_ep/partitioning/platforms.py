"""Platforms: an app ships for Android or for iOS, so the backends registered together, and the other
backends offered as a fix, are those of one platform (:attr:`mobile_ep.Backend.platform`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["platform_of", "same_platform", "platform_groups"]

ANY = "any"
B = TypeVar("B")


def platform_of(backend: object) -> str:
    """The backend's platform (``any`` when it names none)."""
    return str(getattr(backend, "platform", "") or ANY).lower()


def same_platform(a: object, b: object) -> bool:
    """Whether one app could register both backends (a backend of platform ``any`` goes with every one)."""
    pa, pb = platform_of(a), platform_of(b)
    return pa == pb or ANY in (pa, pb)


def platform_groups(backends: Sequence[B]) -> list[tuple[str, list[B]]]:
    """The backends one app could register together, per platform, in priority order: one group per named
    platform (in the order the platforms first appear), each with the backends of platform ``any``; a single
    ``any`` group when no backend names a platform."""
    named = list(dict.fromkeys(platform_of(b) for b in backends if platform_of(b) != ANY))
    if not named:
        return [(ANY, list(backends))] if backends else []
    return [(p, [b for b in backends if platform_of(b) in (p, ANY)]) for p in named]
