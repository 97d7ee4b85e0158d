"""``ProfileRegistry``: loads profile folders, reports bad ones, builds system prompts.

A profile is a folder ``<id>/`` holding ``config.json`` and ``system_prompt.txt``.
Shipped profiles live beside this module; a user directory (``PROFILES_DIR``) is
loaded after them and can add profiles or override shipped ones by id. A folder that
cannot be loaded is reported (``registry.errors`` and a structlog warning, each with
its path and the problem) and the others load regardless. Folders whose name starts
with ``_`` or ``.`` are ignored.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import msgspec
import structlog

from profiles.errors import ProfileError, UnknownProfile
from profiles.model import Profile, ProfileConfig
from profiles.persona import SHIPPED_PERSONA, persona

log = structlog.get_logger(__name__)

SHIPPED_DIR = Path(__file__).parent
DEFAULT_PROFILE_ID = "secretary"
SEPARATOR = "\n---\n"

_config_decoder = msgspec.json.Decoder(ProfileConfig)


def load_profile(folder: Path) -> Profile:
    """Load one profile folder or raise ``ProfileError`` naming the file and problem."""
    config_path = folder / "config.json"
    prompt_path = folder / "system_prompt.txt"
    try:
        raw = config_path.read_bytes()
    except FileNotFoundError:
        raise ProfileError(config_path, "missing config.json") from None
    except OSError as error:
        raise ProfileError(config_path, f"cannot be read: {error.strerror}") from None
    try:
        config = _config_decoder.decode(raw)
    except msgspec.ValidationError as error:
        problem = str(error)
        if "`system_prompt`" in problem:
            problem = "system_prompt belongs in system_prompt.txt, not in config.json"
        raise ProfileError(config_path, problem) from None
    except msgspec.DecodeError as error:
        raise ProfileError(config_path, f"invalid JSON: {error}") from None
    if config.id != folder.name:
        raise ProfileError(
            config_path, f"id {config.id!r} does not match its folder name {folder.name!r}"
        )
    for field in ("enabled_tools", "subagent_tools", "scratchpad_sections"):
        values: tuple[str, ...] = getattr(config, field)
        duplicates = sorted({v for v in values if values.count(v) > 1})
        if duplicates:
            raise ProfileError(config_path, f"{field} lists {', '.join(duplicates)} twice")
    try:
        system_prompt = prompt_path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ProfileError(prompt_path, "missing system_prompt.txt") from None
    except UnicodeDecodeError as error:
        raise ProfileError(prompt_path, f"not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise ProfileError(prompt_path, f"cannot be read: {error.strerror}") from None
    if not system_prompt:
        raise ProfileError(prompt_path, "system_prompt.txt is empty")
    return Profile(**msgspec.structs.asdict(config), system_prompt=system_prompt)


class ProfileRegistry:
    """The loaded profiles, by id.

    ``reload()`` re-reads every folder. A profile whose folder became invalid keeps
    its last good version (reported in ``errors``) so a half-saved edit never takes a
    profile away; a folder that disappeared takes its profile with it.
    """

    def __init__(
        self,
        directories: tuple[Path, ...],
        *,
        environ: Mapping[str, str] | None = None,
        persona_file: Path = SHIPPED_PERSONA,
    ) -> None:
        self.directories = directories
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._persona_file = persona_file
        self.default_id = self._environ.get("NAVI_DEFAULT_PROFILE", "").strip() or (
            DEFAULT_PROFILE_ID
        )
        self.errors: list[ProfileError] = []
        self.persona = ""
        self._profiles: dict[str, Profile] = {}
        self._sources: dict[str, Path] = {}
        self._prompts: dict[Profile, str] = {}

    @classmethod
    def load(
        cls,
        directory: Path | str = SHIPPED_DIR,
        *,
        user_directory: Path | str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ProfileRegistry:
        """Load ``directory`` then ``user_directory`` (whose profiles win by id).

        ``environ`` (default ``os.environ``) gives ``NAVI_DEFAULT_PROFILE`` and the
        persona variables. The persona file defaults to ``directory/persona.txt``, or
        the shipped one when that does not exist.
        """
        base = Path(directory)
        directories = (base,) if user_directory is None else (base, Path(user_directory))
        own_persona = base / "persona.txt"
        registry = cls(
            directories,
            environ=environ,
            persona_file=own_persona if own_persona.exists() else SHIPPED_PERSONA,
        )
        registry.reload()
        return registry

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ProfileRegistry:
        """The shipped profiles plus ``PROFILES_DIR`` when set."""
        env = os.environ if environ is None else environ
        user = env.get("PROFILES_DIR", "").strip() or None
        return cls.load(SHIPPED_DIR, user_directory=user, environ=env)

    # ---------------------------------------------------------------- loading

    def reload(self) -> None:
        errors: list[ProfileError] = []
        profiles: dict[str, Profile] = {}
        sources: dict[str, Path] = {}
        for directory in self.directories:
            if not directory.is_dir():
                errors.append(ProfileError(directory, "profiles directory does not exist"))
                continue
            for folder in sorted(directory.iterdir()):
                if not folder.is_dir() or folder.name.startswith(("_", ".")):
                    continue
                try:
                    profile = load_profile(folder)
                except ProfileError as error:
                    previous = self._profiles.get(folder.name)
                    if previous is not None and self._sources.get(folder.name) == folder:
                        profiles[folder.name], sources[folder.name] = previous, folder
                        errors.append(
                            ProfileError(
                                error.path,
                                f"{error.problem} (kept the previously loaded version)",
                            )
                        )
                    else:
                        errors.append(error)
                    continue
                profiles[profile.id], sources[profile.id] = profile, folder
        try:
            persona_text = persona(self._environ, default_file=self._persona_file)
        except ProfileError as error:
            errors.append(error)
            persona_text = self._fallback_persona()
        if self.default_id not in profiles:
            where = "NAVI_DEFAULT_PROFILE" if "NAVI_DEFAULT_PROFILE" in self._environ else "default"
            errors.append(
                ProfileError(
                    self.directories[-1],
                    f"the {where} profile {self.default_id!r} is not loaded",
                )
            )
        for problem in errors:
            log.warning("profile.invalid", path=str(problem.path), problem=problem.problem)
        self._profiles, self._sources, self.errors = profiles, sources, errors
        self.persona = persona_text
        self._prompts.clear()
        log.info("profiles.loaded", profiles=sorted(profiles), errors=len(errors))

    def _fallback_persona(self) -> str:
        try:
            return persona({}, default_file=self._persona_file)
        except ProfileError:
            return ""

    # ---------------------------------------------------------------- lookup

    def get(self, profile_id: str) -> Profile:
        try:
            return self._profiles[profile_id]
        except KeyError:
            raise UnknownProfile(profile_id, self._profiles) from None

    def default(self) -> Profile:
        return self.get(self.default_id)

    def entering_asks(self, profile_id: object) -> bool:
        """Whether a tool call that enters ``profile_id`` waits for a person (see
        ``Profile.loosens_safety``); an unknown id asks nothing: the call fails."""
        profile = self._profiles.get(profile_id) if isinstance(profile_id, str) else None
        return profile is not None and profile.loosens_safety

    def source_of(self, profile_id: str) -> Path:
        """The folder a profile was loaded from."""
        self.get(profile_id)
        return self._sources[profile_id]

    def all(self) -> list[Profile]:
        return [self._profiles[key] for key in sorted(self._profiles)]

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._profiles

    def __iter__(self) -> Iterator[Profile]:
        return iter(self.all())

    def __len__(self) -> int:
        return len(self._profiles)

    # ---------------------------------------------------------------- prompts

    def system_prompt_for(self, profile: Profile | str) -> str:
        """persona + "\\n---\\n" + the profile's system prompt (cached until reload)."""
        if isinstance(profile, str):
            profile = self.get(profile)
        prompt = self._prompts.get(profile)
        if prompt is None:
            prompt = join_prompt(self.persona, profile.system_prompt)
            if len(self._prompts) >= 256:  # only foreign Profile objects get here
                self._prompts.clear()
            self._prompts[profile] = prompt
        return prompt

    def subagent_prompt_for(self, profile: Profile | str) -> str:
        """persona + "\\n---\\n" + the profile's subagent prompt (not cached: rare)."""
        if isinstance(profile, str):
            profile = self.get(profile)
        return join_prompt(self.persona, profile.subagent_prompt)


def join_prompt(persona_text: str, prompt: str) -> str:
    return f"{persona_text}{SEPARATOR}{prompt}" if persona_text else prompt
