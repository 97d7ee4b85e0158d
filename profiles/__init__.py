"""Profiles: per-domain configuration (tools, model, loop flags, system prompt) and the
global persona. Shipped profiles live in this package's folders; see docs/profiles.md.

Imports nothing of Navi's.
"""

from profiles.errors import ProfileError, UnknownProfile
from profiles.loader import SHIPPED_DIR, ProfileRegistry, load_profile
from profiles.model import Profile, ProfileConfig, profile_hash
from profiles.persona import SHIPPED_PERSONA, persona

__all__ = [
    "SHIPPED_DIR",
    "SHIPPED_PERSONA",
    "Profile",
    "ProfileConfig",
    "ProfileError",
    "ProfileRegistry",
    "UnknownProfile",
    "load_profile",
    "persona",
    "profile_hash",
]
