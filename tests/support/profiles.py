"""The hypothesis profiles of the suite: every example in a full run, half of them in the fast core."""

from __future__ import annotations

from hypothesis import settings

FULL_PROFILE = "full"
"""The hypothesis profile of a full run (CI's ``pytest``): the default number of examples."""

FAST_CORE_PROFILE = "fast-core"
"""The hypothesis profile of ``pytest -m "not slow"``: half of each property test's examples (the default
profile's 100 become 50), so the fast core stays a quick check while the full run keeps them all."""

# No per-example deadline in either profile: an example's time says how busy the machine is, not whether the
# code is right (a loaded 2-core runner took 276 ms over hypothesis' default 200 ms); speed is the benchmarks'.
settings.register_profile(FULL_PROFILE, deadline=None)
settings.register_profile(FAST_CORE_PROFILE, max_examples=50, deadline=None)


def examples(full: int) -> int:
    """``max_examples`` for a property test that draws ``full`` examples in a full run: ``full`` scaled as the
    loaded hypothesis profile scales the default 100 (``full`` under the default profile, half under
    :data:`FAST_CORE_PROFILE`), never fewer than 10 (nor than ``full`` when that is fewer)."""
    scaled = full * settings.default.max_examples // settings.get_profile("default").max_examples
    return max(min(full, 10), scaled)
